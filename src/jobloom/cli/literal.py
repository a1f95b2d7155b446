"""Printing text that came from jobs literally: never as Rich markup or emoji codes, and with control
characters shown escaped instead of sent to the terminal.

A job's payload, error, unique key or tags are anyone's data: ``cannot open [/var/data/in.csv]`` must
not be read as a closing markup tag, ``schedule:heartbeat:`` must not become an emoji, and an ANSI
escape sequence in an error must not move the cursor, change colours or set the window title.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from jobloom.core.text import literal

__all__ = ["LiteralConsole", "literal"]


class LiteralConsole(Console):
    """A Rich console that prints strings literally unless a call asks for markup (``markup=True``,
    with the data parts passed through :func:`rich.markup.escape` and :func:`literal`)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(markup=False, emoji=False, highlight=False, **options)

    def render_str(self, text: str, *, markup: bool | None = None, **options: Any) -> Text:
        """Render ``text``: literally (control characters escaped) unless ``markup=True``."""
        return super().render_str(text if markup else literal(text), markup=markup, **options)
