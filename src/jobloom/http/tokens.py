"""API tokens in the store: created (the token shown once, only its hash kept), listed, revoked.

A token reads ``jlt_<prefix>_<secret>``. The prefix is public and finds the row; the secret's SHA-256
is compared with :func:`hmac.compare_digest`, in constant time. Scopes: ``read`` (every GET),
``enqueue`` (new jobs, batches, runs, events), ``operate`` (cancel, retry, delete, resume, pause,
trigger, limits), ``worker`` (the worker protocol) and ``admin`` (all of them). A ``worker`` token may be
limited to named bindings (``bindings``): it claims, heartbeats and completes only their jobs.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobloom.core.errors import InvalidOption, JobloomError
from jobloom.core.queries import Q
from jobloom.core.rows import TokenRow
from jobloom.core.text import MAX_NAME_BYTES, check_name, name_problem
from jobloom.store import Store, Tx

SCOPES = ("read", "enqueue", "operate", "worker", "admin")
PREFIX = "jlt_"


class TokenExists(JobloomError):
    """A token of that name exists and is not revoked."""


class TokenNotFound(JobloomError):
    """No token of that name."""


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A stored token, without its secret."""

    name: str
    prefix: str
    scopes: tuple[str, ...]
    created_at: datetime
    revoked_at: datetime | None
    bindings: tuple[str, ...] | None = None
    """The only bindings the token may take through the worker protocol (None: every one)."""

    @property
    def active(self) -> bool:
        """Not revoked."""
        return self.revoked_at is None


@dataclass(frozen=True, slots=True)
class StoredToken:
    """A token row as the API checks it: its hash and scopes."""

    name: str
    secret_hash: str
    scopes: frozenset[str]
    bindings: frozenset[str] | None = None
    """The only bindings the token may claim, heartbeat and complete (None: every one)."""

    def matches(self, secret: str) -> bool:
        """Whether ``secret`` is this token's, in constant time."""
        return hmac.compare_digest(hash_secret(secret), self.secret_hash)

    def allows(self, scope: str) -> bool:
        """Whether the token carries ``scope`` (``admin`` carries every one)."""
        return scope in self.scopes or "admin" in self.scopes


def hash_secret(secret: str) -> str:
    """The stored form of a token's secret."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def parse_token(token: str) -> tuple[str, str] | None:
    """``(prefix, secret)`` of a well-formed token, else None."""
    if not token.startswith(PREFIX):
        return None
    prefix, sep, secret = token[len(PREFIX):].partition("_")
    if not sep or not prefix or not secret:
        return None
    return prefix, secret


def check_scopes(scopes: Any) -> tuple[str, ...]:
    """Scopes as a sorted tuple: a comma-separated string or a list of names from :data:`SCOPES`."""
    items = [s.strip() for s in scopes.split(",")] if isinstance(scopes, str) else list(scopes)
    items = [s for s in items if s]
    bad = [s for s in items if s not in SCOPES]
    if bad or not items:
        raise InvalidOption("scopes", scopes, f"a comma-separated list of {', '.join(SCOPES)}")
    return tuple(sorted(set(items), key=SCOPES.index))


MAX_TOKEN_BINDINGS = 100
"""Bindings one token may be limited to, at most."""


def check_bindings(bindings: Any, scopes: tuple[str, ...]) -> tuple[str, ...] | None:
    """A token's binding limit as a sorted tuple (None: no limit): a comma-separated string or a list of
    binding names, only for a token whose only scope is ``worker`` (the limit is on the worker protocol;
    the other scopes, and ``admin``, are not limited by binding)."""
    if bindings is None:
        return None
    items = [b.strip() for b in bindings.split(",")] if isinstance(bindings, str) else list(bindings)
    items = [b for b in items if b]
    if not items or len(items) > MAX_TOKEN_BINDINGS:
        raise InvalidOption("bindings", bindings, f"a comma-separated list of 1 to {MAX_TOKEN_BINDINGS} binding names")
    for b in items:
        problem = name_problem(b, MAX_NAME_BYTES) or (None if "," not in b else "a name without a comma")
        if problem is not None:
            raise InvalidOption("bindings", b, problem)
    if scopes != ("worker",):
        raise InvalidOption("bindings", bindings, "only with --scopes worker: a binding limit applies to the worker "
                            f"protocol, and scopes {','.join(scopes)} would not be limited by it")
    return tuple(sorted(set(items)))


def _info(row: TokenRow) -> TokenInfo:
    def dt(ts: float | None) -> datetime | None:
        return None if ts is None else datetime.fromtimestamp(ts, UTC)

    created = dt(row.created_at)
    assert created is not None
    return TokenInfo(row.name, row.prefix, tuple(row.scopes.split(",")), created, dt(row.revoked_at),
                     None if row.bindings is None else tuple(row.bindings.split(",")))


async def create_token(store: Store, name: str, scopes: Any, bindings: Any = None) -> tuple[str, TokenInfo]:
    """Store a new token; return it (shown once: only its hash is kept) with its info. ``bindings``
    limits a ``worker`` token to those bindings' jobs (see :func:`check_bindings`).

    A revoked token of the same name is replaced; an active one is refused (``TokenExists``)."""
    name = check_name("token name", name, MAX_NAME_BYTES)
    chosen = check_scopes(scopes)
    limited = check_bindings(bindings, chosen)
    prefix, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    now = store.now()

    async def work(tx: Tx) -> TokenRow:
        row = await tx.fetchone(Q.get_token, {"name": name})
        if row is not None and row.revoked_at is None:
            raise TokenExists(f"a token named {name!r} exists; revoke it first (jobloom tokens revoke {name})")
        await tx.execute(Q.delete_revoked_token, {"name": name})
        await tx.execute(Q.insert_token, {"name": name, "prefix": prefix, "secret_hash": hash_secret(secret),
                                          "scopes": ",".join(chosen), "now": now,
                                          "bindings": None if limited is None else ",".join(limited)})
        found = await tx.fetchone(Q.get_token, {"name": name})
        assert found is not None
        return found

    row = await store.transact(work)
    return f"{PREFIX}{prefix}_{secret}", _info(row)


async def list_tokens(store: Store) -> list[TokenInfo]:
    """Every token, revoked ones included, by name."""

    async def work(tx: Tx) -> list[TokenRow]:
        return await tx.fetch(Q.list_tokens)

    return [_info(r) for r in await store.transact(work, exclusive=False)]


async def revoke_token(store: Store, name: str) -> TokenInfo:
    """Revoke a token: requests carrying it are refused (within a second, see ``TokenCache``)."""
    now = store.now()

    async def work(tx: Tx) -> TokenRow | None:
        await tx.execute(Q.revoke_token, {"name": name, "now": now})
        return await tx.fetchone(Q.get_token, {"name": name})

    row = await store.transact(work)
    if row is None:
        raise TokenNotFound(f"no token named {name!r}")
    return _info(row)


async def active_tokens(store: Store) -> dict[str, StoredToken]:
    """The active tokens by prefix."""

    async def work(tx: Tx) -> list[TokenRow]:
        return await tx.fetch(Q.list_tokens)

    rows = await store.transact(work, exclusive=False)
    return {r.prefix: StoredToken(r.name, r.secret_hash, frozenset(r.scopes.split(",")),
                                  None if r.bindings is None else frozenset(r.bindings.split(",")))
            for r in rows if r.revoked_at is None}
