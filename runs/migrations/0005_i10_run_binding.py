from django.db import migrations, models


def bind_existing_runs(apps, schema_editor):  # type: ignore[no-untyped-def]
    Run = apps.get_model("runs", "Run")
    Computer = apps.get_model("executor", "Computer")
    for computer in Computer.objects.all():
        Run.objects.filter(computer=computer, account_id=computer.account_id).update(computer_binding=computer.binding)


class Migration(migrations.Migration):
    dependencies = [("runs", "0004_step_result"), ("executor", "0003_i10_computer_binding")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="computer_binding",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.RunPython(bind_existing_runs, migrations.RunPython.noop),
    ]
