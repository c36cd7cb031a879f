"""Models the tests write to (fenced writes, idempotent tasks)."""

from django.db import models


class FencedRecord(models.Model):
    """A row that lock holders write with ``fenced_update`` (the pause-past-TTL tests)."""

    name = models.CharField(max_length=100, unique=True)
    value = models.CharField(max_length=100, default="")
    fence = models.BigIntegerField(default=0)

    class Meta:
        app_label = "testapp"

    def __str__(self) -> str:
        return f"{self.name}={self.value} (fence {self.fence})"
