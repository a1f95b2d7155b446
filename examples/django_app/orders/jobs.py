"""The shop's jobs. The store is Django's own database (``store_url()``), so views enqueue in their transaction."""

from __future__ import annotations

from dataclasses import dataclass

import jobloom
from jobloom.contrib.django import store_url
from orders.models import Order


@dataclass
class Receipt:
    order: int


class SendReceipt(jobloom.Performer[Receipt, str]):
    max_attempts = 5

    def perform(self, payload: Receipt) -> str:   # a plain def: runs in a thread, where the ORM is at home
        order = Order.objects.get(pk=payload.order)
        order.receipt_sent = True                  # stands for mailing the receipt
        order.save(update_fields=["receipt_sent"])
        return f"receipt for order {order.pk} sent to {order.email}"


app = jobloom.App(store_url(), performers=[SendReceipt])
