"""The servers of a multi-host PostgreSQL URL, and the fencing of an old primary (the decisions alone;
tests/integration/test_failover.py runs them against a real primary, standby and promotion)."""

from __future__ import annotations

from jobloom.store.postgres.hosts import Servers, servers


def test_the_servers_a_url_names_in_order() -> None:
    assert servers("postgresql://u@h1:5432,h2:5433/db?target_session_attrs=read-write") == [
        ("h1", "5432"), ("h2", "5433")]
    assert servers("postgresql://u@h1,h2/db") == [("h1", "5432"), ("h2", "5432")]
    assert servers("postgresql://u@h1:6000/db") == [("h1", "6000")]
    assert not Servers("postgresql://u@h1/db").several
    assert Servers("postgresql://u@h1,h2/db").several


def test_a_writable_server_behind_the_newest_timeline_is_fenced() -> None:
    known = Servers("postgresql://u@old,new/db")
    old, new = ("old", "5432"), ("new", "5432")
    assert known.judge(old, standby=False, timeline=1)
    assert known.judge(new, standby=True, timeline=0)  # a standby is never fenced (libpq passes over it)
    assert known.judge(new, standby=False, timeline=2)  # promoted
    assert not known.judge(old, standby=False, timeline=1)  # restarted as it was: split brain
    assert known.fenced == {old}
    assert known.judge(new, standby=False, timeline=2)
    assert known.judge(old, standby=False, timeline=3)  # rebuilt as a standby and promoted in its turn
    assert known.fenced == set()
