"""``jobloom init`` makes a project whose own tests pass at once; ``jobloom add performer`` grows it.

The project's tests run with this interpreter (the jobloom under test), the project folder on sys.path,
no install; a real worker process runs a job of the new project.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

import jobloom
from jobloom.cli.main import main
from tests.helpers import eventually_sync

pytestmark = pytest.mark.slow


class Done(NamedTuple):
    """How a ``jobloom`` command ended."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str, cwd: Path, rc: int = 0, env: dict[str, str] | None = None) -> Done:
    """Run ``jobloom ARGS`` in-process (as the console script does) in ``cwd``; check its exit status."""
    saved_cwd, saved_env, saved_path = os.getcwd(), dict(os.environ), list(sys.path)
    out, err = io.StringIO(), io.StringIO()
    for key in [k for k in os.environ if k.startswith("JOBLOOM_")]:
        del os.environ[key]
    os.environ.update({"COLUMNS": "200", "NO_COLOR": "1", **(env or {})})
    os.chdir(cwd)
    status = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as exc:
                status = int(exc.code or 0)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.path[:] = saved_path
        for name in [m for m in sys.modules if m == "shop" or m.startswith("shop.")]:
            del sys.modules[name]  # each test's project is a new one
    done = Done(status, out.getvalue(), err.getvalue())
    assert status == rc, f"jobloom {' '.join(args)} exited {status}:\n{done.stdout}\n{done.stderr}"
    if rc:
        assert "Traceback" not in done.stderr and done.stderr.startswith("error: "), done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done


def project_tests(folder: Path) -> str:
    """Run the project's own test suite as its README says (``python -m pytest`` in its folder)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("JOBLOOM_", "PYTEST_"))}
    # only the plugin the project needs (pytest-asyncio): this suite's other plugins take seconds to load
    clean["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "pytest_asyncio.plugin"]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=120, env=clean)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_init_makes_a_project_whose_tests_pass_at_once(tmp_path: Path) -> None:
    made = run_cli("init", "shop", cwd=tmp_path)
    folder = tmp_path / "shop"
    for name in ("pyproject.toml", "README.md", ".gitignore", "shop/__init__.py", "shop/jobs.py", "tests/test_jobs.py"):
        assert (folder / name).is_file(), name
    assert "jobloom worker shop.jobs:app" in made.stdout
    pyproject = (folder / "pyproject.toml").read_text()
    assert 'dependencies = ["jobloom>=' in pyproject and 'app = "shop.jobs:app"' in pyproject
    readme = (folder / "README.md").read_text()
    assert "python -m pytest" in readme and "jobloom worker shop.jobs:app" in readme
    tests = (folder / "tests" / "test_jobs.py").read_text()
    assert "from jobloom.testing import" in tests
    jobs = (folder / "shop" / "jobs.py").read_text()
    assert "jobloom.Schedule(" in jobs and "jobloom.Flow(" in jobs

    assert "3 passed" in project_tests(folder)


def test_init_in_the_current_folder_names_the_package_after_it(tmp_path: Path) -> None:
    folder = tmp_path / "My Mail-Service"
    folder.mkdir()
    run_cli("init", cwd=folder)
    assert (folder / "my_mail_service" / "jobs.py").is_file()
    assert 'name = "my-mail-service"' in (folder / "pyproject.toml").read_text()
    run_cli("init", str(tmp_path / "other"), "--package", "billing", cwd=tmp_path)
    assert (tmp_path / "other" / "billing" / "jobs.py").is_file()
    bad = run_cli("init", str(tmp_path / "2fast"), cwd=tmp_path, rc=1)
    assert "'2fast'" in bad.stderr and "--package" in bad.stderr
    assert not (tmp_path / "2fast").exists() or not any((tmp_path / "2fast").iterdir())


def test_init_refuses_a_folder_that_is_not_empty_unless_forced(tmp_path: Path) -> None:
    folder = tmp_path / "busy"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    refused = run_cli("init", "busy", cwd=tmp_path, rc=1)
    assert str(folder) in refused.stderr and "notes.txt" in refused.stderr and "--force" in refused.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]

    run_cli("init", "busy", "--force", cwd=tmp_path)
    assert (folder / "notes.txt").read_text() == "mine"
    assert (folder / "busy" / "jobs.py").is_file()


def test_add_performer_adds_a_registered_documented_skeleton_and_its_test(tmp_path: Path) -> None:
    run_cli("init", "shop", cwd=tmp_path)
    folder = tmp_path / "shop"
    added = run_cli("add", "performer", "ResizeImage", cwd=folder / "shop")  # from a subfolder: found by walking up
    assert "ResizeImage" in added.stdout and "test_resize_image.py" in added.stdout
    jobs = (folder / "shop" / "jobs.py").read_text()
    assert "class ResizeImagePayload:" in jobs
    assert "class ResizeImage(jobloom.Performer[ResizeImagePayload, str]):" in jobs
    assert '"""Do the work of one job' in jobs
    assert "performers=[Welcome, Digest, FollowUp, ResizeImage]" in jobs
    assert jobs.index("class ResizeImage(") < jobs.index("def make_app(")

    run_cli("add", "performer", "Thumbnail", "--sync", cwd=folder)
    jobs = (folder / "shop" / "jobs.py").read_text()
    assert "    def perform(self, payload: ThumbnailPayload) -> str:" in jobs
    assert "async def perform(self, payload: ResizeImagePayload) -> str:" in jobs
    assert "performers=[Welcome, Digest, FollowUp, ResizeImage, Thumbnail]" in jobs

    assert "5 passed" in project_tests(folder)

    # the app knows it: a real enqueue by name is validated against the new payload type
    run_cli("migrate", "--app", "shop.jobs:app", cwd=folder)
    job = json.loads(run_cli("enqueue", "ResizeImage", '{"id": "7"}', "--app", "shop.jobs:app", "--json",
                             cwd=folder).stdout)
    assert job["binding"] == "ResizeImage"


def test_add_performer_refuses_bad_names_and_duplicates_and_changes_nothing(tmp_path: Path) -> None:
    run_cli("init", "shop", cwd=tmp_path)
    folder = tmp_path / "shop"
    module = folder / "shop" / "jobs.py"
    before = module.read_text()
    for name in ("resize", "class", "Two Words", "9Lives", "Émile"):
        refused = run_cli("add", "performer", name, cwd=folder, rc=1)
        assert "NAME" in refused.stderr and repr(name) in refused.stderr and "class name" in refused.stderr
    for name, taken in (("Welcome", "Welcome"), ("Signup", "Signup"), ("Day", "Day")):
        refused = run_cli("add", "performer", name, cwd=folder, rc=1)
        assert f"already defines {taken!r}" in refused.stderr and str(module) in refused.stderr
    run_cli("add", "performer", "Sign", cwd=folder)
    refused = run_cli("add", "performer", "Sign", cwd=folder, rc=1)
    assert "already defines 'Sign'" in refused.stderr
    assert module.read_text().count("class Sign(") == 1 and module.read_text() != before

    outside = run_cli("add", "performer", "Thing", cwd=tmp_path, rc=1)
    assert "pyproject.toml" in outside.stderr and "--module" in outside.stderr


def test_add_performer_to_a_module_of_ones_own(tmp_path: Path) -> None:
    module = tmp_path / "tasks.py"
    module.write_text('"""My tasks."""\n\nimport jobloom as jl\n\napp = jl.App("sqlite:///x.db", performers=[])\n')
    run_cli("add", "performer", "Ping", "--module", str(module), cwd=tmp_path)
    text = module.read_text()
    assert "from dataclasses import dataclass\nimport jobloom\n" in text
    assert 'performers=[Ping])' in text
    namespace: dict[str, object] = {}
    exec(compile(text, str(module), "exec"), namespace)  # it runs, and the app has the performer
    assert "Ping" in namespace["app"].specs  # type: ignore[attr-defined]


def test_a_worker_runs_the_new_projects_jobs(tmp_path: Path) -> None:
    run_cli("init", "shop", cwd=tmp_path)
    folder = tmp_path / "shop"
    url = f"sqlite:///{folder}/jobloom.db"
    run_cli("migrate", "--app", "shop.jobs:app", cwd=folder, env={"JOBLOOM_URL": url})
    job = json.loads(run_cli("enqueue", "Welcome", '{"email": "ada@example.com", "name": "Ada"}', "--app",
                             "shop.jobs:app", "--json", cwd=folder, env={"JOBLOOM_URL": url}).stdout)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("JOBLOOM_")}
    worker = subprocess.Popen([sys.executable, "-m", "jobloom.cli", "worker", "shop.jobs:app"], cwd=folder,
                              env={**clean, "JOBLOOM_URL": url}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    reader = jobloom.App(url)
    try:
        def finished() -> jobloom.Job | None:
            found = asyncio.run(reader.get_job(job["id"]))
            return found if found.state == "succeeded" else None

        done = eventually_sync(finished, timeout=30, what="the Welcome job to succeed")
        assert done.result == "Welcome, Ada <ada@example.com>!"
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0
