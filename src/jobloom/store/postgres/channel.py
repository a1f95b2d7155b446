"""The ``NOTIFY`` channel of one schema's jobloom tables.

Stores whose tables are in the same schema share one channel, whichever way the schema was chosen
(``schema=``, the URL's ``options=-csearch_path=...``, the role's or the database's default search
path), and stores in other schemas of the same database never hear it: a commit in one schema wakes
only the workers of that schema. The schema is the one the server resolves (``current_schema()``).
"""

from __future__ import annotations

import hashlib
from typing import Any

DEFAULT = "jobloom_default"
"""The channel of the tables in ``public`` (and where no schema of the search path exists)."""


def channel_name(schema: str | None) -> str:
    """The channel of the jobloom tables in ``schema``: ``jobloom_<schema>``, a digest of a name too
    long for a channel (63 bytes), and :data:`DEFAULT` for ``public`` or None."""
    if schema is None or schema == "public":
        return DEFAULT
    name = f"jobloom_{schema}"
    if len(name.encode()) > 63:
        name = "jobloom_" + hashlib.sha1(schema.encode()).hexdigest()[:32]
    return name


async def pool_channel(pool: Any, search_path: str | None, timeout: float) -> str:
    """The channel of the schema that ``pool``'s transactions use (``search_path``: set in each one,
    behind a pooler)."""
    async with pool.connection(timeout=timeout) as conn, conn.transaction():
        if search_path is not None:
            await conn.execute("SELECT set_config('search_path', %s, true)", [search_path])
        cur = await conn.execute("SELECT current_schema()")
        row = await cur.fetchone()
    return channel_name(None if row is None else row[0])
