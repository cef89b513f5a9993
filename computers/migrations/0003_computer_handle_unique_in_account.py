"""``handle`` required, and unique within an account."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("computers", "0002_computer_handle"),
    ]

    operations = [
        migrations.AlterField(
            model_name="computer",
            name="handle",
            field=models.CharField(
                editable=False,
                max_length=128,
                validators=[
                    django.core.validators.RegexValidator(
                        "^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$",
                        "1-128 letters, digits, _ or -, starting with a letter or digit.",
                    )
                ],
            ),
        ),
        migrations.AddConstraint(
            model_name="computer",
            constraint=models.UniqueConstraint(fields=("account", "handle"), name="computer_id_unique_in_account"),
        ),
    ]
