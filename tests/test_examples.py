"""The examples run as the README says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def test_the_demo_runs_every_job_and_the_pipeline(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "COLUMNS": "120"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all jobs finished" in done.stdout
    assert "run img-cat.png: succeeded" in done.stdout and "run img-dog.png: succeeded" in done.stdout
    assert "Permanent: cannot charge -5 cents" in done.stdout
    assert "timed out after 0.5 s" in done.stdout


def test_the_image_pipeline_runs_on_its_own(tmp_path: Path) -> None:
    env = {**os.environ, "JOBLOOM_PIPELINE_URL": f"sqlite:///{tmp_path}/p.db"}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "image_pipeline.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("publish    succeeded") == 2
