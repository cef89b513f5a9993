"""The Computer and DiagnosticArtifact models move here from the executor app, tables untouched.

Their tables (``executor_computer``, ``executor_diagnosticartifact``) were created by the executor
app's migrations (``computers/executor_migrations/``, still applied under the ``executor`` label) and
keep their names (``Meta.db_table``): this migration only records the models in ``computers``'
state, and renames their content types, so permissions, admin log entries and anything else pointing
at a content type keep pointing at the same rows.
"""

import core.prepared
import django.core.validators
import django.db.models.deletion
import uuid
from django.db import migrations, models

MOVED = ("computer", "diagnosticartifact")


def _relabel(apps, schema_editor, old, new):
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    for model in MOVED:
        if not ContentType.objects.using(db).filter(app_label=new, model=model).exists():
            ContentType.objects.using(db).filter(app_label=old, model=model).update(app_label=new)


def content_types_moved(apps, schema_editor):
    _relabel(apps, schema_editor, "executor", "computers")


def content_types_moved_back(apps, schema_editor):
    _relabel(apps, schema_editor, "computers", "executor")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('accounts', '0002_i15_sign_in_guessing'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('executor', '0010_merge_executor_token_and_settings'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='Computer',
                    fields=[
                        ('id', models.CharField(max_length=128, primary_key=True, serialize=False, validators=[django.core.validators.RegexValidator('^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$', '1-128 letters, digits, _ or -, starting with a letter or digit.')])),
                        ('name', models.CharField(blank=True, max_length=200)),
                        ('is_active', models.BooleanField(default=True)),
                        ('status', models.CharField(choices=[('offline', 'Offline'), ('ready', 'Ready'), ('failed', 'Failed')], default='offline', max_length=20)),
                        ('generation', models.UUIDField(blank=True, null=True)),
                        ('binding', models.UUIDField(default=uuid.uuid4, editable=False)),
                        ('executor_address', models.CharField(blank=True, max_length=200)),
                        ('last_heartbeat_at', models.DateTimeField(blank=True, null=True)),
                        ('draining', models.BooleanField(default=False)),
                        ('browser_backend', models.CharField(choices=[('local', 'Local'), ('cdp', 'Cdp'), ('steel', 'Steel'), ('browserbase', 'Browserbase')], default='local', max_length=20)),
                        ('browser_options', models.JSONField(blank=True, default=dict)),
                        ('browser_settings', models.JSONField(blank=True, default=dict)),
                        ('browser_session_id', models.CharField(blank=True, max_length=200)),
                        ('browser_ready_ms', models.PositiveIntegerField(blank=True, null=True)),
                        ('profile_generation', models.UUIDField(default=uuid.uuid4, editable=False)),
                        ('executor_token_digest', models.CharField(blank=True, db_index=True, editable=False, max_length=64)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('account', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='computers', to='accounts.account')),
                    ],
                    options={
                        'db_table': 'executor_computer',
                    },
                    bases=(core.prepared.QuickLoad, models.Model),
                ),
                migrations.CreateModel(
                    name='DiagnosticArtifact',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('kind', models.CharField(choices=[('diagnostic', 'Diagnostic'), ('screenshot', 'Screenshot'), ('download', 'Download'), ('upload', 'Upload')], default='diagnostic', max_length=20)),
                        ('content_type', models.CharField(max_length=100)),
                        ('filename', models.CharField(blank=True, default='', max_length=255)),
                        ('sha256', models.CharField(blank=True, default='', max_length=64)),
                        ('storage_name', models.CharField(max_length=300)),
                        ('size', models.PositiveBigIntegerField(default=0)),
                        ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                        ('account', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='artifacts', to='accounts.account')),
                        ('computer', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='diagnostics', to='computers.computer')),
                    ],
                    options={
                        'db_table': 'executor_diagnosticartifact',
                    },
                ),
            ],
        ),
        migrations.RunPython(content_types_moved, content_types_moved_back),
    ]
