"""The Django application config of ``jobloom.contrib.django`` (it brings the ``jobloom`` management command)."""

from __future__ import annotations

from django.apps import AppConfig


class JobloomConfig(AppConfig):
    """``"jobloom.contrib.django"`` in ``INSTALLED_APPS``: no models, the ``jobloom`` management command."""

    name = "jobloom.contrib.django"
    label = "jobloom"
    verbose_name = "jobloom"
