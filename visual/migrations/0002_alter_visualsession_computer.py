"""The Computer model moved to the computers app; its table and this foreign key's column and constraint
are unchanged (state only)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('computers', '0001_initial'),
        ('visual', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name='visualsession',
                    name='computer',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='visual_sessions', to='computers.computer'),
                ),
            ],
        ),
    ]
