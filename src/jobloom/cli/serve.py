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
from jobloom.core.extras import needs_extra
from jobloom.http.bounds import LONG_POLLS_PER_TOKEN, MAX_CONNECTIONS

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


def choose_auth(host: str, insecure_no_auth: bool) -> AuthMode:
    """The auth mode for serving on ``host``: tokens always, unless ``--insecure-no-auth``, which is refused
    off loopback."""
    if not insecure_no_auth:
        return "required"
    if not is_loopback(host):
        raise UsageProblem(
            f"refusing --insecure-no-auth on {host}, which is not a loopback address: anyone who reaches the "
            "port could act on jobs. Create a token (`jobloom tokens create NAME --scopes ...`) instead"
        )
    return "off"


def serve(
    ctx: typer.Context,
    app_ref: AppOption = None,
    url: UrlOption = None,
    schema: SchemaOption = None,
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="The port to listen on.")] = 8080,
    insecure_no_auth: Annotated[
        bool, typer.Option("--insecure-no-auth", help="Serve without tokens (loopback only; logged loudly).")
    ] = False,
    log_level: Annotated[str, typer.Option(help="uvicorn's log level.")] = "info",
    dashboard: Annotated[bool, typer.Option(help="Serve the web dashboard at / (log in with a token).")] = True,
    log_format: LogFormatOption = LogFormat.text,
    metrics: Annotated[bool, typer.Option(help="Serve Prometheus metrics at /metrics (scope read).")] = True,
    wait: WaitOption = WAIT,
    max_connections: Annotated[int, typer.Option(
        min=1, help="Open connections at most (fewer if `ulimit -n` allows fewer); one more gets 503.")
    ] = MAX_CONNECTIONS,
    max_long_polls: Annotated[int, typer.Option(
        min=1, help="Long polls (claims with wait, job waits) one token may hold at once; 429 beyond.")
    ] = LONG_POLLS_PER_TOKEN,
    header_timeout: Annotated[float, typer.Option(
        min=0.1, help="Seconds a request's headers may take to arrive; 408 and closed beyond.")] = 10.0,
    body_timeout: Annotated[float, typer.Option(
        min=0.1, help="Seconds a request's body may take to arrive (and at most 10 s between two parts); 408 beyond.")
    ] = 60.0,
) -> None:
    """Serve the HTTP API (/v1; docs at /v1/docs; metrics at /metrics) and the web dashboard (/). With
    --url, jobs are enqueued by binding name."""
    # imported here, not with the CLI: the web stack is not loaded for every other command (a worker)
    with needs_extra("web", "jobloom serve"):
        from jobloom.http.server import serve as serve_bounded
        from jobloom.web import asgi
    if metrics:
        with needs_extra("metrics", "jobloom serve's /metrics", " (or --no-metrics)"):
            import prometheus_client  # noqa: F401
    from jobloom.http.bounds import Bounds, connection_cap
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

    auth = choose_auth(host, insecure_no_auth)
    if auth == "off":
        say("WARNING: serving WITHOUT AUTHENTICATION (--insecure-no-auth): any program or user on this host "
            "can read and act on every job; other web sites are refused (Host check, no cross-site forms)")
    elif run(app, count) == 0:
        say("no token exists: every request will be refused until one is created "
            "(jobloom tokens create NAME --scopes ...)")
    options: dict[str, Any] = {}
    if log_format == LogFormat.json:  # uvicorn's loggers propagate to the root logger, which writes JSON
        options["log_config"] = None
    bounds = Bounds(max_connections=connection_cap(max_connections), long_polls_per_token=max_long_polls,
                    header_time=header_timeout, body_time=body_timeout, body_idle=min(10.0, body_timeout))
    if bounds.max_connections < max_connections:
        say(f"at most {bounds.max_connections} connections at once: the descriptor limit (ulimit -n) "
            "allows no more")
    site = asgi(app, auth=auth, named=named, dashboard=dashboard, metrics=metrics, bounds=bounds)
    polls = site.polls
    if auth == "off":
        from jobloom.http.shield import OpenShield, host_names

        site = OpenShield(site, host_names(host))
    check_port_free(host, port)
    serve_bounded(site, host, port, bounds, polls, log_level=log_level, lifespan="on", **options)


def check_port_free(host: str, port: int) -> None:
    """Refuse with one line (exit 1) when ``host:port`` cannot be bound, e.g. another server holds it."""
    import socket

    from jobloom.core.errors import JobloomError

    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return  # uvicorn reports a name it cannot resolve
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise JobloomError(f"cannot serve on {host}:{port}: {exc.strerror or exc} "
                               "(another process holds the port? give --port)") from None
