"""Joins the two branches of the migration graph (no schema change)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('executor', '0005_artifacts_in_storage'),
        ('executor', '0005_computer_profile_generation'),
    ]

    operations = []
