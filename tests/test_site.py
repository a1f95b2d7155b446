"""The documentation site builds strictly (``./dev docs``), and a broken link fails the build."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_the_site_builds_strictly_with_the_generated_references(tmp_path: Path) -> None:
    from tests.conftest import require_module

    require_module("mkdocs", 'pip install -e ".[dev]" to build the documentation site')
    done = _build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "jobloom jobs list" in cli and "--state" in cli  # every command's help, generated from the CLI
    api = (tmp_path / "site" / "reference" / "http-api" / "index.html").read_text()
    assert "/v1/worker/claim" in api and 'id="enqueuebody"' in api  # every operation and schema, from OpenAPI
    python = (tmp_path / "site" / "reference" / "python-api" / "index.html").read_text()
    assert "enqueue_many" in python  # from the docstrings


def _small_site(folder: Path, index: str) -> Path:
    """A site of two pages whose configuration inherits the project's (strictness, validation, theme,
    Markdown extensions) without its hooks, its API reference and its nav: what a link fails is the
    project's own rule, at a fraction of the full build's cost."""
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "index.md").write_text(index)
    (folder / "docs" / "other.md").write_text("# Another page\n")
    (folder / "mkdocs.yml").write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: docs\nhooks: []\nplugins: [search]\n"
        "nav:\n  - Home: index.md\n  - Other: other.md\n"
    )
    return folder


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    from tests.conftest import require_module

    require_module("mkdocs", 'pip install -e ".[dev]" to build the documentation site')
    sound = _small_site(tmp_path / "sound", "# Home\n\nSee [another page](other.md).\n")
    done = _build(sound, tmp_path / "sound-site")
    assert done.returncode == 0, done.stdout + done.stderr  # the same site, its link sound, builds
    broken = _small_site(tmp_path / "broken", "# Home\n\nSee [a page that is not there](how-to/nowhere.md).\n")
    done = _build(broken, tmp_path / "broken-site")
    assert done.returncode != 0
    assert "how-to/nowhere.md" in done.stdout + done.stderr
