"""The pure core: job and run types, the state machine, errors, options, text limits, the dispatch
decision and the retry policy. No I/O, no store; imports nothing else of jobloom."""

from __future__ import annotations
