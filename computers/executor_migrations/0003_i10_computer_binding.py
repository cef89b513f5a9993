import uuid

from django.db import migrations, models


def distinct_bindings(apps, schema_editor):  # type: ignore[no-untyped-def]
    Computer = apps.get_model("executor", "Computer")
    for computer in Computer.objects.all():
        computer.binding = uuid.uuid4()
        computer.save(update_fields=["binding"])


class Migration(migrations.Migration):
    dependencies = [("executor", "0002_diagnostics")]

    operations = [
        migrations.AddField(
            model_name="computer",
            name="binding",
            field=models.UUIDField(default=uuid.uuid4, editable=False),
        ),
        migrations.RunPython(distinct_bindings, migrations.RunPython.noop),
    ]
