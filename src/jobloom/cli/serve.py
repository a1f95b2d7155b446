"""``jobloom serve``: the HTTP API under uvicorn, for an app (``--app``) or a bare store (``--url``)."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jobloom.cli.common import (
    WAIT,
    AppOption,
    LogFormat,
    LogFormatOption,
    SchemaOption,
    UrlOption,
    UsageProblem,
    WaitOption,
    choose_target,
    note,
    open_target,
    run,
)

if TYPE_CHECKING:
    from jobloom.http.auth import AuthMode


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def choose_auth(host: str, tokens: int, insecure_no_auth: bool) -> AuthMode:
    """The auth mode for serving on ``host`` with ``tokens`` active tokens; refuses an open API off loopback."""
    if insecure_no_auth:
        return "off"
    if is_loopback(host):
        return "auto"
    if tokens == 0:
        raise UsageProblem(
            f"refusing to serve on {host}, which is not a loopback address, while no token exists: "
            "create one with `jobloom tokens create NAME --scopes ...` (or pass --insecure-no-auth)"
        )
    return "required"


def serve(
    ctx: typer.Context,
    app_ref: AppOption = None,
    url: UrlOption = None,
    schema: SchemaOption = None,
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="The port to listen on.")] = 8080,
    insecure_no_auth: Annotated[
        bool, typer.Option("--insecure-no-auth", help="Serve without tokens, even on a non-loopback address.")
    ] = False,
    log_level: Annotated[str, typer.Option(help="uvicorn's log level.")] = "info",
    dashboard: Annotated[bool, typer.Option(help="Serve the web dashboard at / (log in with a token).")] = True,
    log_format: LogFormatOption = LogFormat.text,
    metrics: Annotated[bool, typer.Option(help="Serve Prometheus metrics at /metrics (scope read).")] = True,
    wait: WaitOption = WAIT,
) -> None:
    """Serve the HTTP API (/v1; docs at /v1/docs; metrics at /metrics) and the web dashboard (/). With
    --url, jobs are enqueued by binding name."""
    import uvicorn

    # imported here, not with the CLI: the web stack is not loaded for every other command (a worker)
    from jobloom.dashboard.site import create_site
    from jobloom.http.tokens import active_tokens

    if log_format == LogFormat.json:  # from here on, what the server says is a JSON line too (its notes included)
        from jobloom.observe.logs import configure_logging

        configure_logging(log_level, LogFormat.json.value)
        say: Callable[[str], None] = logging.getLogger("jobloom.http").warning
    else:
        say = note

    chosen, _ = choose_target(ctx, app_ref, url)
    app = open_target(ctx, app_ref, url, schema, wait, must_exist=False)
    named = chosen is None  # a bare store: bindings by name

    async def count(a: object) -> int:
        return len(await active_tokens(await app.store()))

    tokens = run(app, count)
    auth = choose_auth(host, tokens, insecure_no_auth)
    if auth == "off":
        say("serving without authentication (--insecure-no-auth): anyone who reaches the port can act on jobs")
    elif auth == "auto" and tokens == 0:
        say("no token exists: the API is open to anyone on this host until one is created "
             "(jobloom tokens create NAME --scopes ...)")
    options: dict[str, Any] = {}
    if log_format == LogFormat.json:  # uvicorn's loggers propagate to the root logger, which writes JSON
        options["log_config"] = None
    site = create_site(app, auth=auth, named=named, dashboard=dashboard, metrics=metrics)
    uvicorn.run(site, host=host, port=port, log_level=log_level, lifespan="on", **options)
