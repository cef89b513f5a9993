"""Masked captures move from the database into the artifacts storage, with their account."""

import django.db.models.deletion
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import migrations, models


def move_bytes_to_storage(apps, schema_editor):  # type: ignore[no-untyped-def]
    Artifact = apps.get_model("executor", "DiagnosticArtifact")
    storage = storages["artifacts"]
    for artifact in Artifact.objects.select_related("computer").iterator():
        data = bytes(artifact.data or b"")
        day = artifact.created_at.strftime("%Y/%m/%d")
        artifact.storage_name = storage.save(f"{day}/{artifact.id}.png", ContentFile(data))
        artifact.size = len(data)
        artifact.account_id = artifact.computer.account_id
        artifact.save(update_fields=["storage_name", "size", "account"])


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("executor", "0004_i20_computer_draining"),
    ]

    operations = [
        migrations.AddField(
            model_name="diagnosticartifact",
            name="account",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="artifacts",
                to="accounts.account",
            ),
        ),
        migrations.AddField(
            model_name="diagnosticartifact",
            name="kind",
            field=models.CharField(
                choices=[("diagnostic", "Diagnostic"), ("screenshot", "Screenshot")], default="diagnostic", max_length=20
            ),
        ),
        migrations.AddField(
            model_name="diagnosticartifact",
            name="size",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="diagnosticartifact",
            name="storage_name",
            field=models.CharField(default="", max_length=300),
            preserve_default=False,
        ),
        migrations.RunPython(move_bytes_to_storage, migrations.RunPython.noop),
        migrations.RemoveField(model_name="diagnosticartifact", name="data"),
        migrations.AlterField(
            model_name="diagnosticartifact",
            name="account",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="artifacts", to="accounts.account"
            ),
        ),
        migrations.AlterField(
            model_name="diagnosticartifact",
            name="created_at",
            field=models.DateTimeField(auto_now_add=True, db_index=True),
        ),
    ]
