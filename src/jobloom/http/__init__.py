"""jobloom over HTTP: the REST API (v1), its tokens and scopes, and its OpenAPI document.

:func:`jobloom.http.factory.create_asgi` builds the API's ASGI application (:func:`jobloom.web.asgi`, the
API with the dashboard); ``jobloom serve`` runs it under uvicorn. This package is an outer layer: it uses
the ``App`` and what lies below it, and nothing below imports it.
"""

from __future__ import annotations
