"""Progress while a benchmark runs: a Rich progress bar on stderr, or nothing."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


class Reporter:
    """Silent progress: the base for :class:`RichReporter`, and what tests and scripts use."""

    def begin(self, label: str, total: int | None) -> None:
        """A new phase starts (``total`` steps, or unknown)."""

    def update(self, completed: int) -> None:
        """``completed`` steps of the current phase are done."""

    def end(self) -> None:
        """The current phase is over."""

    def close(self) -> None:
        """No more phases."""


class RichReporter(Reporter):
    """A progress bar for the phase in progress, on stderr (so ``--json`` on stdout stays clean)."""

    def __init__(self, console: Console | None = None) -> None:
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console or Console(stderr=True),
            transient=False,
        )
        self.progress.start()
        self.task: TaskID | None = None

    def begin(self, label: str, total: int | None) -> None:
        """Add a bar for the phase."""
        self.end()
        self.task = self.progress.add_task(label, total=total)

    def update(self, completed: int) -> None:
        """Move the current bar."""
        if self.task is not None:
            self.progress.update(self.task, completed=completed)

    def end(self) -> None:
        """Remove the current bar: only the phase in progress is shown."""
        if self.task is not None:
            self.progress.remove_task(self.task)
            self.task = None

    def close(self) -> None:
        """Stop drawing."""
        self.end()
        self.progress.stop()
