"""The command line a newcomer meets first: ``--version`` and a token that can be captured with ``$(...)``."""

from __future__ import annotations

from pathlib import Path

import jobloom
from tests.cli.test_cli import Env, cli

__all__ = ["cli"]


def test_version_prints_the_package_version(tmp_path: Path) -> None:
    done = Env(tmp_path).run("--version")
    assert done.stdout.strip() == f"jobloom {jobloom.__version__}"


def test_tokens_create_prints_only_the_token_on_stdout(cli: Env) -> None:
    done = cli.run("tokens", "create", "deploy", "--scopes", "read", "--url", cli.url)
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and " " not in lines[0].strip(), done.stdout
    assert "shown only now" in done.stderr


def test_worker_with_app_option_says_the_app_is_the_first_argument(cli: Env) -> None:
    done = cli.run("worker", "--app", "jobs_app:app", rc=2)
    assert "the app is the first argument" in done.stderr and "MODULE:ATTR" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_cron_value_out_of_range_names_the_field() -> None:
    from jobloom.core.errors import JobloomError
    from jobloom.schedules.schedule import Schedule

    for cron, field in (("61 * * * *", "minute"), ("* 25 * * *", "hour"), ("* * 0 * *", "day"),
                        ("* * * 13 *", "month"), ("* * * * 9", "weekday")):
        try:
            Schedule("n", cron=cron, performer="X")
        except JobloomError as exc:
            assert f"the {field} field" in str(exc), exc
        else:
            raise AssertionError(f"{cron!r} was accepted")


def test_serve_on_a_port_in_use_is_one_line_and_exit_1(cli: Env) -> None:
    import socket

    cli.run("tokens", "create", "deploy", "--scopes", "read", "--url", cli.url)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = cli.run("serve", "--url", cli.url, "--port", str(port), rc=1)
    assert f"127.0.0.1:{port}" in done.stderr and "in use" in done.stderr, done.stderr
