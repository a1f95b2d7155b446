"""The example's one model."""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    """An order; ``receipt_sent`` is set by the ``SendReceipt`` job."""

    email = models.CharField(max_length=200)
    total = models.IntegerField()
    receipt_sent = models.BooleanField(default=False)
