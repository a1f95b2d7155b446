"""``pip install jobloom`` is the engine, the SQLite store and the command line; the rest is extras.

The optional modules are hidden from real ``jobloom`` processes by a ``sitecustomize`` that puts a finder
first on ``sys.meta_path`` (an installation without the extra, as far as Python can tell): the core still
runs jobs, and a command that needs an extra says which one to install, in one line.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from jobloom.core.extras import EXTRAS
from tests.cli.test_cli import DEADLINE, Env
from tests.helpers import eventually_sync

ROOT = Path(__file__).resolve().parents[1]
EXTRA_MODULES = sorted(m for modules in EXTRAS.values() for m in modules)

SITECUSTOMIZE = textwrap.dedent('''
    import atexit, os, sys

    HIDDEN = tuple(filter(None, os.environ.get("HIDE_MODULES", "").split(",")))


    class Hide:
        """Finds the hidden modules first, and refuses them as a missing installation would."""

        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in HIDDEN:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None


    if HIDDEN:
        sys.meta_path.insert(0, Hide())
    if os.environ.get("MODULES_OUT"):
        def dump(out=os.environ["MODULES_OUT"]):
            with open(f"{out}.{os.getpid()}", "w") as f:
                f.write("\\n".join(sorted(sys.modules)))
        atexit.register(dump)
''')


@pytest.fixture
def env(tmp_path: Path) -> Env:
    env = Env(tmp_path)
    env.run("migrate", "--url", env.url)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env.env["PYTHONPATH"] = os.pathsep.join((str(site), env.env["PYTHONPATH"]))
    return env


def _without(*modules: str) -> dict[str, str]:
    return {"HIDE_MODULES": ",".join(modules)}


def _loaded(out: Path) -> dict[int, set[str]]:
    """The modules each process that dumped at exit had imported, by pid."""
    return {int(p.suffix[1:]): set(p.read_text().split()) for p in out.parent.glob(out.name + ".*")}


def _cli(env: Env, *args: str, hidden: dict[str, str], rc: int = 1) -> subprocess.CompletedProcess[str]:
    """``jobloom ARGS`` in a Python started afresh (so that its ``sitecustomize`` hides ``hidden``, which a
    process forked from a started one would not), its error checked as :meth:`Env.run` checks it."""
    done = subprocess.run(env.command(*args), cwd=env.path, env={**env.env, **hidden}, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == rc, f"jobloom {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=;! ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_core_installs_nothing_web_and_dev_has_every_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert _names(project["dependencies"]) == {"pydantic", "typer", "rich", "croniter"}
    extras = project["optional-dependencies"]
    assert set(EXTRAS) <= set(extras), "each extra jobloom names is one pip knows"
    assert "jobloom[all]" in extras["dev"] and extras["all"] == [f"jobloom[{','.join(EXTRAS)}]"]
    assert {"fastapi", "uvicorn", "jinja2"} <= _names(extras["web"]) and "jobloom" in _names(extras["web"])
    assert _names(extras["postgres"]) == {"psycopg", "orjson"}
    assert _names(extras["metrics"]) == {"prometheus-client"}


def _work_one_job(env: Env, hidden: list[str], out: Path) -> None:
    """Run ``jobloom worker`` with ``hidden`` modules missing until it has run one job, then stop it."""
    job = env.enqueue("SendMail", '{"to": "a@example.com"}')
    log_path = env.path / "worker.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(env.command("worker", "jobs_app:app", "--grace", "5"), cwd=env.path,
                                env={**env.env, **_without(*hidden), "MODULES_OUT": str(out)},
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        eventually_sync(lambda: proc.poll() is not None or env.job(job)["state"] == "succeeded",
                        timeout=DEADLINE, what="the job to succeed")
        assert proc.poll() is None, log_path.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=DEADLINE) == 0, log_path.read_text()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    [(pid, modules)] = _loaded(out).items()  # the worker process, which the command became (exec)
    assert pid == proc.pid and "jobloom.engine.worker" in modules
    assert sorted(m for m in modules if m.partition(".")[0] in EXTRA_MODULES) == []


def test_a_sqlite_worker_runs_without_any_extra_and_imports_none(env: Env, tmp_path: Path) -> None:
    _work_one_job(env, EXTRA_MODULES, tmp_path / "hidden")  # as if no extra were installed
    _work_one_job(env, [], tmp_path / "installed")  # installed, and not imported


def test_serve_without_the_web_extra_says_to_install_it(env: Env) -> None:
    for module in ("fastapi", "jinja2"):
        done = _cli(env, "serve", "--url", env.url, "--port", "0", hidden=_without(module))
        assert done.stderr == "error: jobloom serve needs the web extra: pip install 'jobloom[web]'\n"


def test_serve_metrics_without_the_metrics_extra_says_to_install_it(env: Env) -> None:
    done = _cli(env, "serve", "--url", env.url, "--port", "0", hidden=_without("prometheus_client"))
    assert done.stderr == ("error: jobloom serve's /metrics needs the metrics extra: pip install 'jobloom[metrics]' "
                           "(or --no-metrics)\n")


def test_a_postgresql_url_without_the_postgres_extra_says_to_install_it(env: Env) -> None:
    url = "postgresql://postgres@127.0.0.1:5432/test"  # never reached: the driver is missing
    message = "error: a postgresql:// URL needs the postgres extra: pip install 'jobloom[postgres]'\n"
    assert _cli(env, "migrate", "--url", url, hidden=_without("psycopg")).stderr == message
    assert _cli(env, "jobs", "list", "--url", url, hidden=_without("orjson")).stderr == message
    (env.path / "pg_app.py").write_text((env.path / "jobs_app.py").read_text().replace(env.url, url))
    assert _cli(env, "worker", "pg_app:app", hidden=_without("psycopg_pool")).stderr == message


def test_worker_metrics_and_bench_without_their_extras_say_to_install_them(env: Env) -> None:
    done = _cli(env, "worker", "jobs_app:app", "--metrics-port", "0", hidden=_without("prometheus_client"))
    assert done.stderr == ("error: jobloom worker --metrics-port needs the metrics extra: "
                           "pip install 'jobloom[metrics]'\n")
    done = _cli(env, "bench", "run", "--jobs", "10", hidden=_without("psutil"))
    assert done.stderr == "error: jobloom bench needs the bench extra: pip install 'jobloom[bench]'\n"
    assert "bench" in env.run("--help").stdout  # listed, though imported only for itself and the help


def test_library_parts_without_their_extras_name_them(env: Env) -> None:
    code = textwrap.dedent(f'''
        import importlib, jobloom

        class Push(jobloom.HttpPerformer[dict, None]):
            url = "https://example.com/jobs"

        tries = {{
            "asgi": lambda: jobloom.App({env.url!r}).asgi(),
            "push": lambda: jobloom.App({env.url!r}, performers=[Push]),
            "remote": lambda: jobloom.RemoteBinding("Remote", payload={{"type": "object"}}),
            "tracing": lambda: importlib.import_module("jobloom.observe.tracing"),
            "metrics": lambda: importlib.import_module("jobloom.observe.metrics"),
        }}
        for name, attempt in tries.items():
            try:
                attempt()
            except jobloom.JobloomError as exc:
                print(f"{{name}}: {{exc}}")
    ''')
    hidden = _without("fastapi", "httpx", "jsonschema", "opentelemetry", "prometheus_client")
    done = subprocess.run([sys.executable, "-c", code], cwd=env.path, env={**env.env, **hidden},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "asgi: App.asgi() needs the web extra: pip install 'jobloom[web]'",
        "push: HttpPerformer needs the web extra: pip install 'jobloom[web]'",
        "remote: a RemoteBinding's JSON Schema needs the web extra: pip install 'jobloom[web]'",
        "tracing: jobloom.observe.tracing needs the otel extra: pip install 'jobloom[otel]'",
        "metrics: jobloom.observe.metrics needs the metrics extra: pip install 'jobloom[metrics]'",
    ]
