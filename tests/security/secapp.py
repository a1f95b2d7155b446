"""The app the security tests serve with ``jobloom serve --app tests.security.secapp:app`` (the HTTP tests'
app, on the store named by ``JOBLOOM_SEC_URL``; ``JOBLOOM_SEC_SCHEMA`` names its PostgreSQL schema)."""

from __future__ import annotations

import os

from tests.http.apps import make_app

app = make_app(os.environ["JOBLOOM_SEC_URL"])
if os.environ.get("JOBLOOM_SEC_SCHEMA"):  # its own wake-up channel, not the one other tests' stores share
    app.store_options["schema"] = os.environ["JOBLOOM_SEC_SCHEMA"]
