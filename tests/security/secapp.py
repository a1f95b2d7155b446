"""The app the security tests serve with ``jobloom serve --app tests.security.secapp:app`` (the HTTP tests'
app, on the store named by ``JOBLOOM_SEC_URL``)."""

from __future__ import annotations

import os

from tests.http.apps import make_app

app = make_app(os.environ["JOBLOOM_SEC_URL"])
