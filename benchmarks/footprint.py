"""What ``pip install jobloom`` costs a library user: installed size, import time, a worker's memory.

    python benchmarks/footprint.py VENV [VENV ...] [--runs 15] [--jobs 200]

Each VENV is a virtualenv with jobloom installed (for example one with ``pip install jobloom`` and one with
``pip install 'jobloom[all]'``, or two checkouts). For each, measured with its own Python:

- the distributions installed beside pip and setuptools, and the size of its site-packages;
- import time (CPU time, the minimum of ``--runs`` runs with the median, since other load on the machine
  only adds time) and the modules imported, of ``import jobloom``,
  ``from jobloom import App``, ``jobloom.cli.main`` (what ``jobloom worker`` loads before it becomes the
  worker process) and ``jobloom.process`` (the worker process);
- the RSS of ``jobloom worker APP`` on SQLite (one process, default flags) once it ran ``--jobs`` no-op
  jobs: resident now and at its peak (``VmRSS``, ``VmHWM``), and the third-party packages it imported.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

IMPORTS = {  # what is measured: the module whose import it is
    "import jobloom": "jobloom",
    "jobloom.App": "jobloom.app.facade",
    "jobloom.cli.main (the worker command)": "jobloom.cli.main",
    "jobloom.process (the worker process)": "jobloom.process",
}
APP = textwrap.dedent('''
    import atexit, sys
    import jobloom

    class Noop(jobloom.Performer[dict, None]):
        async def perform(self, payload: dict) -> None:
            return None

    app = jobloom.App(URL, performers=[Noop])
    atexit.register(lambda: open(MODULES, "w").write("\\n".join(sorted(sys.modules))))
''')


def import_ms(python: str, module: str, runs: int) -> tuple[float, float, int]:
    """(minimum, median) CPU milliseconds of ``import module`` (its packages and what they import included),
    and how many modules it added. CPU time (``time.process_time``), not wall time: on a shared machine,
    other processes' load moves it far less."""
    code = (f"import sys, time; n = len(sys.modules); t = time.process_time(); import {module}; "
            "print(time.process_time() - t, len(sys.modules) - n)")
    times, count = [], 0
    for _ in range(runs):
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.split()
        times.append(float(out[0]) * 1000)
        count = int(out[1])
    return min(times), statistics.median(times), count


def installed(python: str) -> tuple[list[str], float]:
    """The distributions installed (beside pip and setuptools) and site-packages' size in MiB."""
    out = subprocess.run([python, "-m", "pip", "list", "--format=json"], capture_output=True, text=True,
                         check=True).stdout
    names = sorted(d["name"] for d in json.loads(out) if d["name"] not in ("pip", "setuptools", "wheel"))
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    size = sum(f.stat().st_size for f in Path(site).rglob("*") if f.is_file() and not f.is_symlink())
    return names, size / 2**20


def worker_rss(python: str, jobs: int) -> tuple[float, float, list[str]]:
    """(VmRSS, VmHWM) in MiB of ``jobloom worker`` once it ran ``jobs`` jobs, and what it imported."""
    jobloom = str(Path(python).parent / "jobloom")
    with tempfile.TemporaryDirectory() as tmp:
        db, modules = Path(tmp) / "jobs.db", Path(tmp) / "modules.txt"
        source = APP.replace("URL", repr(f"sqlite:///{db}")).replace("MODULES", repr(str(modules)))
        (Path(tmp) / "fp_app.py").write_text(source)
        env = {**os.environ, "PYTHONPATH": tmp}
        subprocess.run([jobloom, "migrate", "--app", "fp_app:app"], cwd=tmp, env=env, check=True,
                       capture_output=True)
        code = f"import asyncio, fp_app; asyncio.run(fp_app.app.enqueue_many([(fp_app.Noop, {{}})] * {jobs}))"
        subprocess.run([python, "-c", code], cwd=tmp, env=env, check=True)
        proc = subprocess.Popen([jobloom, "worker", "fp_app:app"], cwd=tmp, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with sqlite3.connect(db) as con:
                    done = con.execute("SELECT count(*) FROM jobloom_jobs WHERE state = 'succeeded'").fetchone()[0]
                if done == jobs:
                    break
                time.sleep(0.1)
            else:
                raise SystemExit(f"{python}: the worker did not run {jobs} jobs within 60 s")
            status = dict(line.split(":", 1) for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines())
            rss, hwm = (int(status[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        third = sorted({m.partition(".")[0] for m in modules.read_text().split()} - set(sys.stdlib_module_names)
                       - {"jobloom", "fp_app", "_distutils_hack"})
        third = [m for m in third if not m.startswith("_")]
    return rss, hwm, third


def main() -> None:
    """Measure each virtualenv and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("venvs", nargs="+")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--jobs", type=int, default=200)
    args = parser.parse_args()
    columns: dict[str, list[str]] = {}
    for venv in args.venvs:
        python = str(Path(venv) / "bin" / "python")
        names, size = installed(python)
        column = [f"{len(names)}", f"{size:.0f}"]
        for module in IMPORTS.values():
            low, mid, count = import_ms(python, module, args.runs)
            column.append(f"{low:.0f} ({mid:.0f}), {count} modules")
        rss, hwm, third = worker_rss(python, args.jobs)
        column += [f"{rss:.1f}", f"{hwm:.1f}", ", ".join(third)]
        columns[venv] = column
        print(f"{venv}: {', '.join(names)}", file=sys.stderr)
    rows = ["distributions installed (beside pip, setuptools)", "site-packages, MiB",
            *(f"`{name}`: import CPU ms, min (median); modules" for name in IMPORTS),
            f"`jobloom worker` on SQLite after {args.jobs} jobs: RSS, MiB", "... its peak RSS (VmHWM), MiB",
            "... third-party packages it imported"]
    print("| measurement | " + " | ".join(f"`{v}`" for v in args.venvs) + " |")
    print("|---|" + "---|" * len(args.venvs))
    for i, row in enumerate(rows):
        print(f"| {row} | " + " | ".join(columns[v][i] for v in args.venvs) + " |")


if __name__ == "__main__":
    main()
