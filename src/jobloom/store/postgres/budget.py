"""The connection budget of a worker process on PostgreSQL: what it holds, and whether the server has
room for it, checked when the worker starts (never found out mid-run).

A worker process holds at most ``pool_max`` pooled connections (its cycles, the heartbeats, the
housekeepers, progress writes and ``NOTIFY`` share them) and one more that listens for wake-ups
(none behind a pooler without ``listen_url``). The server takes ``max_connections`` clients, of which
``superuser_reserved_connections`` only for superusers. A worker started with a capped pool
(``jobloom worker --pool-max N``: the store's ``reserve=True``) checks, on its first connection, that
what is left has room for all of its connections, then opens its whole pool at once: it either starts
with every connection it will use, or fails at start with an error that names the budget.
"""

from __future__ import annotations

from typing import Any

from jobloom.core.errors import StoreError

BUDGET = ("SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int, "
          "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'), "
          "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)")


def budget_error(where: str, row: tuple[Any, ...], need: int, pool_max: int, listens: bool,
                 own: int = 0) -> StoreError | None:
    """The error saying that ``need`` connections do not fit the server's budget (``row``: the answer to
    :data:`BUDGET`, counting ``own`` connections of this process already open), or None when they fit."""
    max_connections, reserved, superuser = int(row[0]), int(row[1]), bool(row[3])
    in_use = int(row[2]) - own
    usable = max_connections - (0 if superuser else reserved)
    left = usable - in_use
    if need <= left:
        return None
    listening = " + 1 listening for wake-ups" if listens else ""
    return StoreError(
        f"not enough connections on PostgreSQL at {where} for this worker process: max_connections="
        f"{max_connections} ({reserved} reserved for superusers{'' if superuser else ', not for this role'}), "
        f"{in_use} in use, so {left} left, and this process needs {need} ({pool_max} pooled{listening}). "
        f"Lower --pool-max, run fewer worker processes, put PgBouncer in front, or raise max_connections "
        f"(N processes need N x (pool_max + 1))"
    )


async def check_budget(conn: Any, where: str, pool_max: int, *, listens: bool) -> None:
    """On ``conn`` (this process's one connection so far): :class:`StoreError` unless the server has room
    for ``pool_max`` pooled connections and, if ``listens``, one listening."""
    cur = await conn.execute(BUDGET)
    row = await cur.fetchone()
    assert row is not None
    error = budget_error(where, tuple(row), pool_max + (1 if listens else 0), pool_max, listens, own=1)
    if error is not None:
        raise error
