"""URLs of the example shop."""

from __future__ import annotations

from django.urls import path
from orders import views

urlpatterns = [
    path("orders", views.orders),
    path("orders/<int:pk>", views.show_order),
]
