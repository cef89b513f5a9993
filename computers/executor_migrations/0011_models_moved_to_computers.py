"""The executor app's models now live in computers (computers/migrations/0001_initial.py): they
leave this app's state only; their tables stay, under the same names."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('executor', '0010_merge_executor_token_and_settings'),
        ('computers', '0001_initial'),
        ('runs', '0012_alter_run_computer'),
        ('visual', '0002_alter_visualsession_computer'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(model_name='diagnosticartifact', name='computer'),
                migrations.RemoveField(model_name='diagnosticartifact', name='account'),
                migrations.DeleteModel(name='Computer'),
                migrations.DeleteModel(name='DiagnosticArtifact'),
            ],
        ),
    ]
