"""A Flask app built by a factory, with the jobloom extension: POST /signups enqueues a Welcome job.

    flask --app mailer run --port 5000          # and a worker: jobloom worker mailer.jobs:app
"""

from __future__ import annotations

from flask import Flask, jsonify, request
from flask.typing import ResponseReturnValue

import jobloom
from jobloom.contrib.flask import Jobloom

queue = Jobloom()   # bound to each app by the factory


def create_app() -> Flask:
    app = Flask(__name__)
    app.config["JOBLOOM_APP"] = "mailer.jobs:app"
    queue.init_app(app)

    @app.post("/signups")
    def signup() -> ResponseReturnValue:
        from mailer.jobs import Welcome

        data = request.get_json()
        job = queue.enqueue(Welcome, {"email": data["email"]})     # App.enqueue_sync
        return jsonify(job=job.id, state=job.state), 201

    @app.get("/jobs/<int:job_id>")
    def show(job_id: int) -> ResponseReturnValue:
        job = queue.app.run_sync(queue.app.get_job(job_id))
        return jsonify(job=job.id, state=job.state, result=job.result)

    @app.errorhandler(jobloom.JobNotFound)
    def not_found(exc: jobloom.JobNotFound) -> ResponseReturnValue:
        return jsonify(error=str(exc)), 404

    return app
