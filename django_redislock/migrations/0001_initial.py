"""The permission-carrying ``Dashboard`` model (unmanaged: no table is created)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="Dashboard",
            fields=[
                (
                    "id",
                    models.AutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
            ],
            options={
                "verbose_name": "dashboard",
                "verbose_name_plural": "dashboard",
                "permissions": (
                    ("view_dashboard", "Can view held locks and queued tasks"),
                    ("release_locks", "Can force-release held locks"),
                    ("manage_tasks", "Can run, requeue and delete queued tasks"),
                    ("purge_queues", "Can purge whole queues"),
                ),
                "managed": False,
                "default_permissions": (),
            },
        ),
    ]
