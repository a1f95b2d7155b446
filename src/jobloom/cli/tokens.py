"""``jobloom tokens create|list|revoke``: the HTTP API's tokens (the token is printed once; a hash is kept)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from jobloom.cli.common import (
    WAIT,
    AppOption,
    JsonOption,
    SchemaOption,
    UrlOption,
    WaitOption,
    console,
    fmt_time,
    note,
    open_target,
    print_json,
    print_table,
    run,
)
from jobloom.http.tokens import SCOPES, TokenInfo, create_token, list_tokens, revoke_token

tokens_cli = typer.Typer(name="tokens", help="Tokens of the HTTP API.", no_args_is_help=True)


def _info(t: TokenInfo) -> dict[str, object]:
    return {"name": t.name, "prefix": t.prefix, "scopes": list(t.scopes),
            "bindings": None if t.bindings is None else list(t.bindings), "created_at": t.created_at,
            "revoked_at": t.revoked_at, "active": t.active}


@tokens_cli.command("create")
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A name for the token (who or what uses it).")],
    scopes: Annotated[str, typer.Option(help=f"Comma-separated: {', '.join(SCOPES)}.")],
    bindings: Annotated[str | None, typer.Option(
        help="With --scopes worker: the only bindings (comma-separated) the token may claim, heartbeat and "
             "complete.")] = None,
    app_ref: AppOption = None,
    url: UrlOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """Create a token and print it once: only its hash is stored."""
    app = open_target(ctx, app_ref, url, schema, wait)

    async def go(a: object) -> tuple[str, TokenInfo]:
        return await create_token(await app.store(), name, scopes, bindings)

    token, info = run(app, go)
    if as_json:
        print_json({**_info(info), "token": token})
        return
    console.print(token, highlight=False, markup=False)
    limit = "" if info.bindings is None else f" for bindings {','.join(info.bindings)} only"
    note(f"token {info.name!r} with scopes {','.join(info.scopes)}{limit}; it is shown only now: store it safely")


@tokens_cli.command("list")
def list_(
    ctx: typer.Context, app_ref: AppOption = None, url: UrlOption = None, schema: SchemaOption = None,
    as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """Every token (never the secret), revoked ones included."""
    app = open_target(ctx, app_ref, url, schema, wait)

    async def go(a: object) -> list[TokenInfo]:
        return await list_tokens(await app.store())

    found = run(app, go)
    if as_json:
        print_json([_info(t) for t in found])
        return
    table = Table("name", "prefix", "scopes", "bindings", "created", "revoked")
    for t in found:
        table.add_row(t.name, t.prefix, ",".join(t.scopes), "(all)" if t.bindings is None else ",".join(t.bindings),
                      fmt_time(t.created_at), fmt_time(t.revoked_at))
    print_table(table)


@tokens_cli.command("revoke")
def revoke(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The token's name.")],
    app_ref: AppOption = None, url: UrlOption = None, schema: SchemaOption = None,
    wait: WaitOption = WAIT,
) -> None:
    """Revoke a token: servers refuse it within a second."""
    app = open_target(ctx, app_ref, url, schema, wait)

    async def go(a: object) -> TokenInfo:
        return await revoke_token(await app.store(), name)

    info = run(app, go)
    console.print(f"token {info.name!r} revoked", highlight=False)
