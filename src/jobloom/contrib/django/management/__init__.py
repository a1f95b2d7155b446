"""Django management commands of jobloom (``python manage.py jobloom ...``)."""

from __future__ import annotations
