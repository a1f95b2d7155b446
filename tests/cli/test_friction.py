"""A newcomer's frictions, each reproduced through the ``jobloom`` command and shown gone: attempt
counts, narrow and piped tables, time zones, the schedules' vocabulary, unknown payload keys, and
what ``limits`` says."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests import forkcli

from .test_cli import Env

FRICTION_APP = '''
from __future__ import annotations

from dataclasses import dataclass

import jobloom


@dataclass
class Mail:
    to: str


class SendMail(jobloom.Performer[Mail, str]):
    async def perform(self, payload: Mail) -> str:
        return f"sent to {payload.to}"


class Lenient(jobloom.Performer[Mail, str]):
    unknown_keys = "drop"

    async def perform(self, payload: Mail) -> str:
        return payload.to


class AlwaysFails(jobloom.Performer[Mail, None]):
    max_attempts = 2
    backoff = jobloom.Backoff.fixed(0)

    async def perform(self, payload: Mail) -> None:
        raise RuntimeError("the mail server said no to " + payload.to + " and this error is long on purpose, "
                           "longer than any column of an eighty-column terminal could hold on one line")


class Napper(jobloom.Performer[Mail, str]):
    max_attempts = 1

    async def perform(self, payload: Mail) -> str:
        await self.sleep("first", 0.01)
        await self.sleep("second", 0.01)
        return "rested"


class PerTenant(jobloom.Performer[Mail, None]):
    concurrency_key = staticmethod(lambda mail: mail.to)
    key_concurrency = 2

    async def perform(self, payload: Mail) -> None:
        return None


app = jobloom.App(URL, performers=[SendMail, Lenient, AlwaysFails, Napper, PerTenant], schedules=[
    jobloom.Schedule("nightly-report-for-the-berlin-office", cron="0 3 * * *", performer=SendMail,
                     payload={"to": "ops@example.com"}, timezone="Europe/Berlin"),
])
'''

APP = ("--app", "friction_app:app")


class FrictionEnv(Env):
    """``Env`` with the app above, as ``friction_app``."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        source = FRICTION_APP.replace("URL", repr(self.url), 1)
        (tmp_path / "friction_app.py").write_text(textwrap.dedent(source))

    def drain(self) -> None:
        """Run every due job until none is left (durable sleeps included), in a process of its own."""
        code = ("import asyncio, friction_app\n"
                "async def go():\n"
                "    while await friction_app.app.drain():\n"
                "        await asyncio.sleep(0.02)\n"
                "    await friction_app.app.close()\n"
                "asyncio.run(go())")
        done = forkcli.run([], code=code, cwd=self.path, env=self.env, timeout=60)
        assert done.returncode == 0, done.stderr

    def piped(self, *args: str, columns: int | None = 80) -> str:
        """``jobloom args`` with stdout to a pipe (as ``| less`` would), ``COLUMNS`` as given."""
        env = {k: v for k, v in self.env.items() if k != "COLUMNS"}
        if columns is not None:
            env["COLUMNS"] = str(columns)
        done = forkcli.run(args, cwd=self.path, env=env, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout


@pytest.fixture
def fx(tmp_path: Path, _sqlite_template: str) -> FrictionEnv:
    env = FrictionEnv(tmp_path)
    env.migrated(_sqlite_template)
    return env


def _enqueue(fx: FrictionEnv, binding: str, payload: dict[str, Any]) -> int:
    return int(fx.json("enqueue", binding, json.dumps(payload), *APP)["id"])


# -- a. attempt counts -------------------------------------------------------------------------------


def test_a_manual_retry_gives_a_fresh_budget_and_the_count_says_so(fx: FrictionEnv) -> None:
    job_id = _enqueue(fx, "AlwaysFails", {"to": "a@example.com"})
    fx.drain()
    job = fx.job(job_id)
    assert (job["state"], job["attempt"], job["attempts_spent"], job["max_attempts"]) == ("failed", 2, 2, 2)
    fx.run("jobs", "retry", str(job_id), "--url", fx.url)
    fx.drain()
    job = fx.job(job_id)
    # four executions in the history, but never more attempts spent than the budget allows
    assert (job["state"], job["attempt"], job["attempts_spent"]) == ("failed", 4, 2)
    listed = fx.run("jobs", "list", "--url", fx.url).stdout
    assert "2/2" in listed and "4/2" not in listed
    shown = fx.run("jobs", "show", str(job_id), "--url", fx.url).stdout
    assert "2 of 2 spent (4 executions in all)" in shown
    history = fx.json("jobs", "show", str(job_id), "--url", fx.url)["attempts"]
    assert [a["attempt"] for a in history] == [1, 2, 3, 4]


def test_durable_sleeps_spend_no_attempt(fx: FrictionEnv) -> None:
    job_id = _enqueue(fx, "Napper", {"to": "a@example.com"})
    fx.drain()
    job = fx.job(job_id)
    # max_attempts = 1 and two sleeps: it still succeeds, having spent one attempt in three executions
    assert (job["state"], job["attempt"], job["attempts_spent"]) == ("succeeded", 3, 1), job
    assert "1/1" in fx.run("jobs", "list", "--url", fx.url).stdout
    outcomes = [a["outcome"] for a in fx.json("jobs", "show", str(job_id), "--url", fx.url)["attempts"]]
    assert len(outcomes) == 3 and outcomes[-1] == "succeeded"


# -- b. narrow and piped tables -----------------------------------------------------------------------


def _fits(text: str, width: int) -> None:
    too_wide = [line for line in text.splitlines() if len(line) > width]
    assert not too_wide, "\n".join(too_wide)


def test_narrow_and_piped_tables_become_records_that_cut_nothing(fx: FrictionEnv) -> None:
    job_id = _enqueue(fx, "AlwaysFails", {"to": "a@example.com"})
    fx.drain()
    error = fx.job(job_id)["error"]
    assert len(error) > 80
    for columns in (80, None):  # COLUMNS=80, and a pipe with no COLUMNS at all
        shown = fx.piped("jobs", "show", str(job_id), "--url", fx.url, columns=columns)
        shown = shown.split("traceback of attempt")[0]  # tracebacks are printed verbatim, as Python wrote them
        _fits(shown, 80)
        # the attempts are records, each field on its own line, the error whole (folded, not cut)
        assert "…" not in shown
        folded = " ".join(shown.split())
        assert error in folded or error.replace(" ", "") in shown.replace("\n", "").replace(" ", "")
        assert "outcome" in shown and "worker" in shown
        # no column squeezed to a character per line: no line of the output is a lone character
        assert not [line for line in shown.splitlines() if len(line.strip()) == 1], shown
        schedules = fx.piped("schedules", "list", *APP, columns=columns)
        _fits(schedules, 80)
        assert "nightly-report-for-the-berlin-office" in schedules
        assert not [line for line in schedules.splitlines() if len(line.strip()) == 1], schedules
        listed = fx.piped("jobs", "list", "--url", fx.url, columns=columns)
        _fits(listed, 80)
        assert str(job_id) in listed and "the mail server said no" in listed
    wide = fx.piped("jobs", "list", "--url", fx.url, columns=400)
    assert "┃" in wide or "│" in wide  # a table where it fits


# -- c. time zones ------------------------------------------------------------------------------------


def test_every_time_printed_names_its_zone(fx: FrictionEnv) -> None:
    listed = fx.piped("schedules", "list", *APP, columns=300)
    [info] = fx.json("schedules", "list", *APP)
    from datetime import datetime
    from zoneinfo import ZoneInfo

    berlin = datetime.fromisoformat(info["next_run"]).astimezone(ZoneInfo("Europe/Berlin"))
    assert berlin.hour == 3
    assert berlin.strftime("%Y-%m-%d 03:00:00 Europe/Berlin") in listed
    job_id = _enqueue(fx, "SendMail", {"to": "a@example.com"})
    fx.drain()
    shown = fx.piped("jobs", "show", str(job_id), "--url", fx.url, columns=300)
    times = [line for line in shown.splitlines() if line.startswith(("created", "started", "finished"))]
    assert len(times) == 3 and all(line.rstrip().endswith(" UTC") for line in times), shown
    in_tokyo = subprocess.run(fx.command("jobs", "show", str(job_id), "--url", fx.url), cwd=fx.path,
                              env={**fx.env, "TZ": "Asia/Tokyo"}, capture_output=True, text=True, timeout=60)
    assert " JST" in in_tokyo.stdout, in_tokyo.stdout


# -- d. the schedules' vocabulary ---------------------------------------------------------------------


def test_schedules_list_says_where_each_was_defined_the_same_with_url_and_app(fx: FrictionEnv) -> None:
    add = ("import asyncio, jobloom, friction_app\n"
           "async def go():\n"
           "    app = friction_app.app\n"
           "    await app.add_schedule(jobloom.Schedule('ping', every=60, performer=friction_app.SendMail,"
           " payload={'to': 'p@example.com'}))\n"
           "    await app.close()\n"
           "asyncio.run(go())")
    done = forkcli.run([], code=add, cwd=fx.path, env=fx.env, timeout=60)  # a process of its own
    assert done.returncode == 0, done.stderr
    fx.drain()  # a worker's pass stores the app's schedules, so a bare --url store sees them too
    by_app = {s["name"]: s["origin"] for s in fx.json("schedules", "list", *APP)}
    by_url = {s["name"]: s["origin"] for s in fx.json("schedules", "list", "--url", fx.url)}
    assert by_app == by_url == {"nightly-report-for-the-berlin-office": "code", "ping": "runtime"}
    for target in (APP, ("--url", fx.url)):
        out = fx.piped("schedules", "list", *target, columns=300)
        rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}
        assert "in code" in rows["nightly-report-for-the-berlin-office"] and "at run time" in rows["ping"], out
        assert "(stored)" not in out and "(runtime)" not in out


# -- h. unknown payload keys --------------------------------------------------------------------------


def test_unknown_payload_keys_are_refused_by_name_unless_the_performer_drops_them(fx: FrictionEnv) -> None:
    done = fx.run("enqueue", "SendMail", '{"to": "x", "extra": 1}', *APP, rc=1)
    assert "unknown key 'extra'" in done.stderr and "SendMail" in done.stderr
    misspelt = fx.run("enqueue", "SendMail", '{"too": "x"}', *APP, rc=1)
    assert "'to'" in misspelt.stderr and "unknown key 'too'" in misspelt.stderr
    assert fx.json("jobs", "list", "--url", fx.url) == []
    job = fx.json("enqueue", "Lenient", '{"to": "x", "extra": 1}', *APP)
    assert job["payload"] == {"to": "x"}


# -- i. limits ----------------------------------------------------------------------------------------


def test_limits_list_shows_per_key_only_for_keyed_bindings_and_only_the_legend_needed(fx: FrictionEnv) -> None:
    registered = ("import asyncio, friction_app\n"
                  "async def go():\n"
                  "    await friction_app.app.register_bindings()\n"
                  "    await friction_app.app.close()\n"
                  "asyncio.run(go())")
    done = forkcli.run([], code=registered, cwd=fx.path, env=fx.env, timeout=60)  # a process of its own
    assert done.returncode == 0, done.stderr
    for target in (APP, ("--url", fx.url)):
        out = fx.piped("limits", "list", *target, columns=300)
        rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
                for line in out.splitlines() if line.count("│") > 3}
        assert rows["SendMail"][1] == "-" and rows["PerTenant"][1] == "2", out
        assert "?" not in out and "*" not in out, out  # nothing to explain: no legend
    [keyed] = [r for r in fx.json("limits", "list", "--url", fx.url) if r["binding"] == "PerTenant"]
    assert keyed["keyed"] is True
    changed = fx.piped("limits", "set", "SendMail", "--concurrency", "4", "--url", fx.url, columns=300)
    assert "4 *" in changed and "* changed at run time" in changed and "? set in code" not in changed


def test_limits_set_refuses_a_binding_no_one_registered_unless_forced(fx: FrictionEnv) -> None:
    refused = fx.run("limits", "set", "SendMial", "--concurrency", "2", "--url", fx.url, rc=1)
    assert "'SendMial'" in refused.stderr and "--force" in refused.stderr
    assert fx.json("limits", "list", "--url", fx.url) == []  # nothing stored
    forced = fx.run("limits", "set", "Later", "--concurrency", "2", "--force", "--url", fx.url)
    assert "stored with --force" in forced.stderr
    [row] = fx.json("limits", "list", "--url", fx.url)
    assert (row["binding"], row["concurrency"]) == ("Later", 2)
    again = fx.run("limits", "set", "Later", "--concurrency", "3", "--url", fx.url)  # known now: its row exists
    assert "--force" not in again.stderr and "no worker has registered 'Later' yet" in again.stderr
    assert fx.run("limits", "set", "SendMail", "--concurrency", "2", *APP).returncode == 0



# -- e. PostgreSQL schemas ----------------------------------------------------------------------------


@pytest.mark.postgres
def test_commands_name_the_postgresql_schema_they_use(tmp_path: Path) -> None:
    import uuid

    from ..conftest import INSTALL_POSTGRES, POSTGRES_URL, require_module, require_postgres

    require_module("jobloom.store.postgres", INSTALL_POSTGRES)
    require_postgres()
    import psycopg

    env = Env(tmp_path)
    schema = f"jl_fx_{uuid.uuid4().hex[:10]}"
    target = ("--url", POSTGRES_URL, "--schema", schema)
    try:
        # a schema without jobloom's tables is named, not shown as "no jobs"
        empty = env.run("jobs", "list", *target, rc=1)
        assert f"no jobloom tables in the store (schema '{schema}')" in empty.stderr
        assert "no jobs" not in empty.stdout
        migrated = env.run("migrate", *target).stdout
        assert f"(schema '{schema}')" in migrated and "applied" in migrated
        assert f"(schema '{schema}'): up to date" in env.run("migrate", *target).stdout
        # a store that jobloom 0.2 migrated part of the way names its schema too, and its last migration
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DELETE FROM "{schema}".jobloom_migrations')
            conn.execute(f'INSERT INTO "{schema}".jobloom_migrations VALUES (1, \'0001_engine\', 0)')
        behind = env.run("jobs", "list", *target, rc=1)
        assert (f"the store (schema '{schema}') records 1 of jobloom 0.2's migrations 0001 to 0027 "
                "(the last: 0001_engine)") in behind.stderr
        for command in (("jobs", "list"), ("jobs", "show"), ("limits", "set"), ("schedules", "list"),
                        ("bindings", "pause"), ("tokens", "list"), ("serve",), ("migrate",)):
            assert "--schema" in env.run(*command, "--help").stdout, command
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
