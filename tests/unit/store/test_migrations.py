"""Which migrations a store needs, judged from the ones it records (``jobloom.store.migrations``)."""

from __future__ import annotations

import pytest

from jobloom import MigrationsTooOld
from jobloom.store.migrations import BASELINE, missing_migrations, pending, version_of
from jobloom.store.sql import Migration, load_migrations

OF_0_2 = [f"{v:04d}_step{v}" for v in range(1, BASELINE + 1)]
"""Names standing for the 27 migrations a store that jobloom 0.2 migrated records (only versions count)."""
EVERY = [Migration(BASELINE, "0027_baseline", ""), Migration(28, "0028_next", ""), Migration(29, "0029_then", "")]


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_each_dialect_starts_at_the_baseline_and_numbers_later_migrations_after_it(dialect: str) -> None:
    every = load_migrations(dialect)
    assert every[0].name == f"{BASELINE:04d}_baseline"
    assert [m.version for m in every] == sorted({m.version for m in every})
    assert all(m.version > BASELINE for m in every[1:])


@pytest.mark.parametrize(("recorded", "due"), [
    ([], ["0027_baseline", "0028_next", "0029_then"]),                 # a new store
    (["0027_baseline"], ["0028_next", "0029_then"]),                   # started at the baseline
    (OF_0_2, ["0028_next", "0029_then"]),                              # migrated by jobloom 0.2
    ([*OF_0_2, "0028_next"], ["0029_then"]),
    (["0028_next", "0027_baseline"], ["0029_then"]),                   # in any order
    (["0027_baseline", "0028_next", "0029_then", "0030_newer"], []),   # a newer jobloom's own: left alone
])
def test_the_migrations_due(recorded: list[str], due: list[str]) -> None:
    assert [m.name for m in pending(EVERY, recorded)] == due


@pytest.mark.parametrize(("recorded", "last", "count"), [
    (OF_0_2[:1], "0001_step1", 1),
    (OF_0_2[:21], "0021_step21", 21),
    (OF_0_2[:26], "0026_step26", 26),
    ([*OF_0_2[:4], *OF_0_2[5:]], "0027_step27", 26),                    # one missing in the middle
    ([*OF_0_2[:26], "0028_next"], "0028_next", 26),                    # a later one without the baseline
    (["0028_next"], "0028_next", 0),
])
def test_a_store_that_0_2_migrated_part_of_the_way_is_refused(recorded: list[str], last: str, count: int) -> None:
    with pytest.raises(MigrationsTooOld) as refused:
        pending(EVERY, recorded)
    assert (refused.value.last, refused.value.count, refused.value.where) == (last, count, "")
    assert str(refused.value).startswith(f"the store records {count} of jobloom 0.2's migrations 0001 to 0027 "
                                         f"(the last: {last}): ")
    assert "file x" in str(refused.value.at("file x"))


def test_a_recorded_name_gives_its_version() -> None:
    assert version_of("0027_baseline") == 27
    assert version_of("0103_something_else") == 103
    assert [m.name for m in missing_migrations("sqlite", OF_0_2)] == [m.name for m in load_migrations("sqlite")[1:]]
