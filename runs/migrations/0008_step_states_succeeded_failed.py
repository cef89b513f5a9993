"""A settled step is ``succeeded`` or ``failed`` (its result an error), no longer ``completed``."""

from django.db import migrations, models


def split_completed(apps, schema_editor):  # type: ignore[no-untyped-def]
    RunStep = apps.get_model("runs", "RunStep")
    completed = RunStep.objects.filter(state="completed")
    completed.filter(summary__isError=True).update(state="failed")
    completed.update(state="succeeded")


def join_settled(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("runs", "RunStep").objects.filter(state__in=["succeeded", "failed"]).update(state="completed")


class Migration(migrations.Migration):
    dependencies = [("runs", "0007_merge_i13_i17")]

    operations = [
        migrations.AlterField(
            model_name="runstep",
            name="state",
            field=models.CharField(
                choices=[
                    ("started", "Started"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("uncertain", "Uncertain"),
                ],
                default="started",
                max_length=20,
            ),
        ),
        migrations.RunPython(split_completed, join_settled),
    ]
