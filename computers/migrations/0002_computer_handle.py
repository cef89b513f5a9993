"""Every computer gets ``handle``, its id within its account: a stored computer's is its id.

The backfill is its own migration (0003 then makes the column required and unique per account):
on PostgreSQL, rows updated in a transaction leave deferred foreign-key checks pending, and the
table cannot be altered in that same transaction.
"""

from django.db import migrations, models
from django.db.models import F


def handles_from_ids(apps, schema_editor):
    Computer = apps.get_model("computers", "Computer")
    Computer.objects.using(schema_editor.connection.alias).filter(handle__isnull=True).update(handle=F("id"))


class Migration(migrations.Migration):

    dependencies = [
        ("computers", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="computer",
            name="handle",
            field=models.CharField(max_length=128, null=True, editable=False),
        ),
        migrations.RunPython(handles_from_ids, migrations.RunPython.noop),
    ]
