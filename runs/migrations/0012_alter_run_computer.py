"""The Computer model moved to the computers app; its table and this foreign key's column and constraint
are unchanged (state only)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('computers', '0001_initial'),
        ('runs', '0011_long_wait'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name='run',
                    name='computer',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='runs', to='computers.computer'),
                ),
            ],
        ),
    ]
