"""Every error the API returns is ``{"error": {"type", "message", "field"?}}``.

``type`` is the jobloom error class (``InvalidOption``, ``JobNotFound``, ...) or one of the API's own
below; the status follows the kind: 400 a malformed request, 401 no or a bad token, 403 a token
without the scope, 404 nothing of that id or name, 408 a wait that timed out, 409 a state that does
not allow the action, 413 a body or payload over the limit, 422 a value that is not accepted, 503
the store unavailable. Bad input never gets a 500.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse

from jobloom.core.errors import (
    BatchNotFound,
    ClaimRefused,
    InvalidOption,
    InvalidPayload,
    InvalidTransition,
    JobloomError,
    JobNotFound,
    PayloadTooLarge,
    StoreError,
    UnknownBinding,
    WaitTimeout,
)
from jobloom.flows.flow import FlowError
from jobloom.flows.runs import RunNotFound
from jobloom.schedules.schedule import UnknownSchedule

log = logging.getLogger("jobloom.http")


class ApiError(JobloomError):
    """An error of the HTTP layer itself, with its status and (when one field is at fault) the field."""

    status = 400

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class BadRequest(ApiError):
    """The request cannot be read (malformed JSON, a parameter of the wrong kind)."""


class InvalidRequest(ApiError):
    """A request field has a value of the wrong type or shape."""

    status = 422


class Unauthorized(ApiError):
    """No token, or a token that is wrong or revoked."""

    status = 401


class Forbidden(ApiError):
    """A valid token that lacks the scope the operation needs."""

    status = 403


class NotFound(ApiError):
    """No such path, or nothing of that name."""

    status = 404


class MethodNotAllowed(ApiError):
    """The path exists but not with that method."""

    status = 405


class RequestTooLarge(ApiError):
    """The request body is larger than the API accepts."""

    status = 413


STATUS: tuple[tuple[type[Exception], int], ...] = (
    (ClaimRefused, 403), (JobNotFound, 404), (BatchNotFound, 404), (RunNotFound, 404), (UnknownSchedule, 404),
    (UnknownBinding, 422),
    (InvalidTransition, 409), (PayloadTooLarge, 413), (WaitTimeout, 408),
    (InvalidPayload, 422), (InvalidOption, 422), (FlowError, 422), (StoreError, 503),
)


def status_of(exc: JobloomError) -> int:
    """The HTTP status of a jobloom error."""
    if isinstance(exc, ApiError):
        return exc.status
    for cls, status in STATUS:
        if isinstance(exc, cls):
            return status
    return 400


def field_of(exc: JobloomError) -> str | None:
    """The request field a jobloom error is about, when it names one."""
    if isinstance(exc, ApiError):
        return exc.field
    explicit: str | None = getattr(exc, "api_field", None)  # set by a route that knows better
    if explicit is not None:
        return explicit
    if isinstance(exc, InvalidPayload):
        return "payload"
    if isinstance(exc, InvalidOption):
        return exc.option
    if isinstance(exc, UnknownBinding):
        return "binding"
    return None


def error_body(kind: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The error envelope."""
    detail: dict[str, Any] = {"type": kind, "message": message}
    if field is not None:
        detail["field"] = field
    return {"error": detail}


def error_response(exc: JobloomError, headers: dict[str, str] | None = None) -> JSONResponse:
    """The response for a jobloom error (its notes, such as a batch item's index, join the message)."""
    message = "; ".join([str(exc), *getattr(exc, "__notes__", [])])
    if getattr(exc, "closes", False):  # the connection is not worth keeping (a refused long poll)
        headers = {**(headers or {}), "connection": "close"}
    return JSONResponse(error_body(type(exc).__name__, message, field_of(exc)), status_code=status_of(exc),
                        headers=headers)


def _loc(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    out = ""
    for p in parts:
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out or ".".join(str(p) for p in loc)


def validation_response(exc: RequestValidationError) -> JSONResponse:
    """A request that does not fit its model: 400 if the body is not JSON, else 422 naming the field."""
    errors: list[dict[str, Any]] = [dict(e) for e in exc.errors()]
    first: dict[str, Any] = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}
    if first.get("type") == "json_invalid":
        ctx = first.get("ctx") or {}
        return JSONResponse(error_body("BadRequest", f"the body is not valid JSON: {ctx.get('error', first['msg'])}"),
                            status_code=400)
    field = _loc(tuple(first.get("loc", ())))
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    message = f"invalid {field or 'request'}: {first.get('msg', 'invalid')}{more}"
    return JSONResponse(error_body("InvalidRequest", message, field or None), status_code=422)


def install(api: FastAPI) -> None:
    """Route every error through the envelope."""

    async def on_jobloom(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, JobloomError)
        return error_response(exc)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return validation_response(exc)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        kinds = {404: NotFound, 405: MethodNotAllowed, 413: RequestTooLarge, 401: Unauthorized, 403: Forbidden}
        kind = kinds.get(exc.status_code, BadRequest)
        message = str(exc.detail) if exc.detail else kind.__doc__ or "error"
        return JSONResponse(error_body(kind.__name__, message), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error in %s %s", request.method, request.url.path)
        return JSONResponse(error_body("InternalError", "an unexpected error; the server log has its traceback"),
                            status_code=500)

    api.add_exception_handler(JobloomError, on_jobloom)
    api.add_exception_handler(RequestValidationError, on_validation)
    api.add_exception_handler(StarletteHTTPException, on_http)
    api.add_exception_handler(Exception, on_unexpected)
