"""With CI=true nothing skips: a skip of any kind is reported as a failure, unless a test is marked
``allowed_skip`` with its reason. Without CI a skip stays a skip, with a message that says how to run it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

TESTS = {
    "conftest.py": "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401\n",
    "test_skips.py": (
        "import pytest\n\n"
        "def test_skips_in_its_body():\n    pytest.skip('no server')\n\n"
        "@pytest.mark.skipif(True, reason='not here')\n"
        "def test_skipped_by_a_mark():\n    pass\n\n"
        "@pytest.fixture\n"
        "def missing():\n    pytest.skip('no binary')\n\n"
        "def test_skips_in_a_fixture(missing):\n    pass\n\n"
        "@pytest.mark.allowed_skip(reason='documented')\n"
        "def test_allowed_to_skip():\n    pytest.skip('allowed')\n\n"
        "def test_passes():\n    pass\n"
    ),
    "test_missing_module.py": (
        "from tests.conftest import require_module\n"
        "require_module('jobloom_no_such_module', 'pip install it')\n\n"
        "def test_never_collected():\n    pass\n"
    ),
}


def run_suite(tmp_path: Path, ci: str) -> dict[str, int]:
    for name, text in TESTS.items():
        (tmp_path / name).write_text(text)
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "markers=allowed_skip",
         "--continue-on-collection-errors", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    summary = out.stdout.strip().splitlines()[-1]
    return {kind: int(n) for n, kind in re.findall(r"(\d+) (\w+)", summary)}


@pytest.mark.parametrize(("ci", "want"), [
    # a skip in a test's body fails; one in its setup (a skipif mark, a fixture) or while its module
    # is collected is an error
    ("true", {"failed": 1, "errors": 3, "skipped": 1, "passed": 1}),
    ("", {"skipped": 5, "passed": 1}),
])
def test_skips_fail_under_ci_unless_allowed(tmp_path: Path, ci: str, want: dict[str, int]) -> None:
    assert run_suite(tmp_path, ci) == want
