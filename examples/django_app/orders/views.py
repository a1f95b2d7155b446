"""POST /orders makes an order and its receipt job in one transaction; GET /orders lists the orders.

``?after_commit=1`` enqueues the receipt once the transaction has committed instead
(``enqueue_on_commit``: the way for a store in another database).
"""

from __future__ import annotations

import json

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods

from jobloom.contrib.django import enqueue, enqueue_on_commit
from orders.jobs import Receipt, SendReceipt
from orders.models import Order


class PaymentDeclined(Exception):
    pass


@csrf_exempt
@require_http_methods(["GET", "POST"])
def orders(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        return JsonResponse({"orders": [show(o) for o in Order.objects.order_by("pk")]})
    data = json.loads(request.body)
    after_commit = request.GET.get("after_commit") == "1"
    job = None
    try:
        with transaction.atomic():
            order = Order.objects.create(email=data["email"], total=data["total"])
            if after_commit:
                enqueue_on_commit(SendReceipt, Receipt(order=order.pk))   # enqueued once this commits
            else:
                job = enqueue(SendReceipt, Receipt(order=order.pk))   # on Django's connection, in this transaction
            if data.get("decline"):
                raise PaymentDeclined(f"card declined for {data['total']}")   # rolls back the order and its job
    except PaymentDeclined as exc:
        return JsonResponse({"error": str(exc)}, status=402)
    return JsonResponse({"order": order.pk, "job": None if job is None else job.id}, status=201)


def show(order: Order) -> dict[str, object]:
    return {"order": order.pk, "email": order.email, "receipt_sent": order.receipt_sent}


@require_GET
def show_order(request: HttpRequest, pk: int) -> JsonResponse:
    order = Order.objects.filter(pk=pk).first()
    if order is None:
        return JsonResponse({"error": f"no order {pk}"}, status=404)
    return JsonResponse(show(order))
