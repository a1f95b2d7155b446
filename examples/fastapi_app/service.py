"""A FastAPI service: the lifespan opens the jobloom app, POST /signups enqueues, the jobloom API is at /jobs.

    uvicorn service:api --port 8000            # and a worker: jobloom worker welcome_jobs:app
"""

from __future__ import annotations

from fastapi import FastAPI
from welcome_jobs import Signup, Welcome, app

from jobloom.contrib.fastapi import lifespan, mount

api = FastAPI(title="signups", lifespan=lifespan(app))   # the store is opened and checked at start-up
mount(api, app, "/jobs")    # jobloom's API at /jobs/v1/... (a token on every call: jobloom tokens create)


@api.post("/signups", status_code=201)
async def signup(body: Signup) -> dict[str, int]:
    job = await app.enqueue(Welcome, body, unique_key=body.email)   # one welcome per address
    return {"job": job.id}
