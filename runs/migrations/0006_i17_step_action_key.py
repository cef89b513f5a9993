from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0005_i10_run_binding"),
    ]

    operations = [
        migrations.AddField(
            model_name="runstep",
            name="idempotency_key",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AddField(
            model_name="runstep",
            name="request_digest",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddConstraint(
            model_name="runstep",
            constraint=models.UniqueConstraint(
                condition=models.Q(("idempotency_key", ""), _negated=True),
                fields=("run", "idempotency_key"),
                name="run_step_action_key_once",
            ),
        ),
    ]
