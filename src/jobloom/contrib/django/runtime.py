"""The app reference that ``manage.py jobloom`` hands to jobloom's command line and worker processes.

``jobloom.contrib.django.runtime:app`` names :func:`app`, which sets Django up (from
``DJANGO_SETTINGS_MODULE``, which ``manage.py`` sets and worker processes inherit) before importing the
app of ``settings.JOBLOOM["app"]``: performers may use the ORM, and their modules may import models.
"""

from __future__ import annotations

from jobloom.app.facade import App

REF = "jobloom.contrib.django.runtime:app"
"""This module's app reference, as ``jobloom worker`` takes it."""


def app() -> App:
    """Django set up, then the jobloom app of ``settings.JOBLOOM["app"]``."""
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()
    from jobloom.contrib.django import get_app

    return get_app()
