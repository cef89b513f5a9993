"""A continued run ends with the terminal status ``continued`` instead of staying ``waiting_for_input``."""

from django.db import migrations, models


def mark_continued(apps, schema_editor):  # type: ignore[no-untyped-def]
    Run = apps.get_model("runs", "Run")
    for run in Run.objects.filter(status="waiting_for_input", continuation__isnull=False).select_related("continuation"):
        run.status = "continued"
        run.finished_at = run.continuation.created_at
        run.save(update_fields=["status", "finished_at"])


def unmark_continued(apps, schema_editor):  # type: ignore[no-untyped-def]
    Run = apps.get_model("runs", "Run")
    Run.objects.filter(status="continued").update(status="waiting_for_input", finished_at=None)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0007_merge_i13_i17"),
    ]

    operations = [
        migrations.AlterField(
            model_name="run",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("waiting_for_input", "Waiting For Input"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                    ("continued", "Continued"),
                ],
                default="queued",
                max_length=20,
            ),
        ),
        migrations.RunPython(mark_continued, unmark_continued),
    ]
