"""Joins the two branches of the migration graph (no schema change)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0009_merge_continued_status_and_step_states'),
        ('runs', '0009_run_queue_computer_hold'),
    ]

    operations = []
