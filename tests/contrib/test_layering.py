"""``import jobloom`` never imports a web framework: the integrations are imported only by their users."""

from __future__ import annotations

import subprocess
import sys


def test_importing_jobloom_and_its_cli_imports_no_framework() -> None:
    code = ("import sys, jobloom, jobloom.testing, jobloom.cli.main\n"
            "loaded = sorted(m for m in ('django', 'flask', 'jobloom.contrib') if m in sys.modules)\n"
            "print(','.join(loaded))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == ""
