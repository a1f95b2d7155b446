"""Which migrations a store still needs, judged from the ones it records.

jobloom's schema starts at a baseline, ``0027_baseline``: one migration that creates at once the schema
that migrations 0001 to 0027 of jobloom 0.2 built one change at a time. Its version is that of the last
of them, so that every store is judged by the versions it records:

- none: a new store, which gets the baseline and every later migration;
- all of 1 to 27 (a store that 0.2 migrated), or 27 alone (one that started at the baseline): at the
  baseline, with nothing to change; it gets the later migrations (0028 on) it lacks;
- anything else (some of 1 to 27, not all: a store that 0.2 migrated part of the way): refused with
  :class:`~jobloom.core.errors.MigrationsTooOld`, which names the last migration it records and the way
  up (jobloom 0.2's own ``jobloom migrate`` first). Nothing is applied to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from jobloom.core.errors import MigrationsTooOld
from jobloom.store.sql import Migration, load_migrations

BASELINE = 27
"""The baseline's version: a store recording it (with all or none of 1 to 26) has the schema of 0.2."""

_OF_0_2 = frozenset(range(1, BASELINE))
"""The versions of jobloom 0.2's migrations before the baseline's, recorded by the stores 0.2 migrated."""


def version_of(name: str) -> int:
    """The version of a migration recorded as ``name`` (``NNNN_name``)."""
    return int(name.split("_", 1)[0])


def pending(every: Sequence[Migration], recorded: Iterable[str]) -> list[Migration]:
    """The migrations of ``every`` (a dialect's, in order) that a store recording the migrations named
    ``recorded`` still needs, in order.

    Raises :class:`~jobloom.core.errors.MigrationsTooOld` (its ``where`` empty) for a store that jobloom
    0.2 migrated part of the way, whose schema the baseline cannot be applied to."""
    names = sorted(recorded, key=version_of)
    versions = {version_of(name) for name in names}
    if versions:
        before = versions & _OF_0_2
        if BASELINE not in versions or before not in (frozenset(), _OF_0_2):
            raise MigrationsTooOld(names[-1], len(before) + (BASELINE in versions), BASELINE)
    return [m for m in every if m.version not in versions]


def missing_migrations(dialect: str, recorded: Iterable[str]) -> list[Migration]:
    """The migrations of ``dialect`` that a store recording ``recorded`` still needs (see :func:`pending`)."""
    return pending(load_migrations(dialect), recorded)
