"""jobloom over HTTP: the REST API (v1), its tokens and scopes, and its OpenAPI document.

``App.asgi()`` (or :func:`jobloom.http.factory.create_asgi`) builds the ASGI application; ``jobloom
serve`` runs it under uvicorn. This package is an outer layer: it uses the ``App`` and what lies
below it, and nothing below imports it (``App.asgi`` imports it when called).
"""

from __future__ import annotations
