"""Under a Django project's own ``LOGGING`` (a root handler with its formatter, existing loggers disabled
as ``dictConfig`` does by default), the lines of ``manage.py jobloom worker`` still come out in jobloom's
format, their time with its zone."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from tests.conftest import require_module
from tests.helpers import eventually_sync

require_module("django", "pip install -e '.[dev]' (Django is a dev dependency)")

SETTINGS = """
import os

SECRET_KEY = "test"
INSTALLED_APPS = ["jobloom.contrib.django"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["DJANGO_DB"]}}
JOBLOOM = {"app": "side_jobs:app"}
USE_TZ = True
TIME_ZONE = "Europe/Berlin"  # Django sets the process's zone to it (TZ): local times are Berlin's
LOGGING = {
    "version": 1,
    "formatters": {"plain": {"format": "{levelname} {name} {message}", "style": "{"}},
    "handlers": {"out": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout", "formatter": "plain"}},
    "root": {"handlers": ["out"], "level": "INFO"},
}
"""

SIDE_JOBS = """
import logging
import os

import jobloom


class Ping(jobloom.Performer[dict, str]):
    async def perform(self, payload: dict) -> str:
        logging.getLogger("shop").info("the project's own line")
        return "pong"


app = jobloom.App(os.environ["SIDE_STORE"], performers=[Ping])
"""

MANAGE = """
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "logsite")
from django.core.management import execute_from_command_line

execute_from_command_line(sys.argv)
"""

STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [+-]\d{4} INFO jobloom\.worker job_outcome job_id=1 ")


def test_worker_lines_name_their_zone_under_djangos_logging(tmp_path: Path) -> None:
    (tmp_path / "logsite.py").write_text(textwrap.dedent(SETTINGS))
    (tmp_path / "side_jobs.py").write_text(textwrap.dedent(SIDE_JOBS))
    (tmp_path / "manage.py").write_text(textwrap.dedent(MANAGE))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("JOBLOOM_", "DJANGO_"))},
           "SIDE_STORE": f"sqlite:///{tmp_path}/jobs.db", "DJANGO_DB": str(tmp_path / "django.db"),
           "PYTHONPATH": str(tmp_path)}

    def manage(*args: str) -> None:
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr

    manage("jobloom", "migrate")
    code = "import side_jobs as s; s.app.run_sync(s.app.enqueue(s.Ping, {})); s.app.close_sync()"
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, check=True, timeout=60)
    worker = subprocess.Popen([sys.executable, "manage.py", "jobloom", "worker"], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err: list[str] = []
    out: list[str] = []
    readers = [threading.Thread(target=lambda s=s, into=into: into.extend(s), daemon=True)
               for s, into in ((worker.stderr, err), (worker.stdout, out))]
    for r in readers:
        r.start()
    try:
        eventually_sync(lambda: any("job_outcome" in line for line in err), timeout=30,
                        what="the worker's job_outcome line on stderr")
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
        for r in readers:
            r.join(10)
    line = next(line for line in err if "job_outcome" in line)
    assert STAMP.match(line), line
    assert re.search(r" \+0[12]00 INFO", line), line  # TIME_ZONE's offset, named in the line
    assert "INFO shop the project's own line\n" in out, out  # the project's own loggers follow its LOGGING
