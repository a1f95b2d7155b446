"""The app the security tests serve with ``jobloom serve --app tests.security.secapp:app`` (the HTTP tests'
app and two more remote bindings, on the store named by ``JOBLOOM_SEC_URL``)."""

from __future__ import annotations

import os

import jobloom
from tests.http.apps import make_app

WORKER_BINDINGS = (
    jobloom.RemoteBinding("Transcode", concurrency=8),
    jobloom.RemoteBinding("Clip", timeout=1.5, max_attempts=2, backoff=jobloom.Backoff.fixed(0.05)),
)
"""Remote bindings of the worker identity tests (tests/security/test_worker_identity.py)."""

app = make_app(os.environ["JOBLOOM_SEC_URL"], WORKER_BINDINGS)
