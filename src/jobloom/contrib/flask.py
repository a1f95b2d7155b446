"""Flask: an extension for the app factory, and enqueueing from a request.

::

    queue = Jobloom()                                  # at import, no Flask app yet

    def create_app() -> Flask:
        flask_app = Flask(__name__)
        flask_app.config["JOBLOOM_APP"] = "mailer.jobs:app"   # MODULE:ATTR, or an App object
        queue.init_app(flask_app)
        return flask_app

    @bp.post("/signups")
    def signup():
        job = queue.enqueue(Welcome, {"email": request.json["email"]})   # App.enqueue_sync
        return {"job": job.id}, 201

Workers run apart, as ever: ``jobloom worker mailer.jobs:app``.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, current_app

from jobloom.app.facade import App
from jobloom.app.loading import load_app
from jobloom.core.errors import JobloomError
from jobloom.core.types import Job
from jobloom.engine.enqueue import PerformerRef

EXTENSION = "jobloom"
"""The key of the jobloom app in ``flask_app.extensions``."""


class Jobloom:
    """The jobloom extension: ``Jobloom(flask_app)``, or ``Jobloom()`` then ``init_app(flask_app)`` in a factory.

    The jobloom app is ``app=`` (given here or to :meth:`init_app`), else the Flask config's
    ``JOBLOOM_APP``: an :class:`~jobloom.App` or a ``MODULE:ATTR`` reference to one."""

    def __init__(self, flask_app: Flask | None = None, *, app: App | str | None = None) -> None:
        self._app = app
        if flask_app is not None:
            self.init_app(flask_app)

    def init_app(self, flask_app: Flask, *, app: App | str | None = None) -> None:
        """Attach the jobloom app to ``flask_app`` (``flask_app.extensions["jobloom"]``)."""
        target = app or self._app or flask_app.config.get("JOBLOOM_APP")
        if target is None:
            raise JobloomError("no jobloom app for Flask: set JOBLOOM_APP in the Flask config to 'module:attr' "
                               "(e.g. 'mailer.jobs:app'), or pass app= to Jobloom() or init_app()")
        resolved = load_app(target) if isinstance(target, str) else target
        if not isinstance(resolved, App):
            raise JobloomError(f"JOBLOOM_APP is a {type(resolved).__name__}, not a jobloom.App or 'module:attr'")
        flask_app.extensions[EXTENSION] = resolved

    @property
    def app(self) -> App:
        """The jobloom app of the current Flask app (inside a request or an app context)."""
        found = current_app.extensions.get(EXTENSION)
        if found is None:
            raise JobloomError("this Flask app has no jobloom app: call Jobloom(flask_app) or init_app(flask_app)")
        return found  # type: ignore[no-any-return]

    def enqueue(self, performer: PerformerRef, payload: Any, *, connection: Any = None, **options: Any) -> Job:
        """Enqueue one job from a view: :meth:`App.enqueue_sync` with the same arguments.

        ``connection``: your own open psycopg or sqlite3 connection to the same database, to insert the job
        in your transaction (it exists if and only if you commit)."""
        return self.app.enqueue_sync(performer, payload, connection=connection, **options)
