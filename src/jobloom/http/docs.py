"""The API's documentation pages, served without internet: ``/v1/docs`` (Swagger UI) and ``/v1/redoc``.

Their scripts come from the ``fastapi-offline`` package (MIT), which ships Swagger UI 5 (swagger-ui-dist,
Apache-2.0) and ReDoc 2 (MIT) as files; they are served from ``/v1/docs/assets/``, so no page of the API
loads anything from another host.
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/v1/docs/assets"


def assets_dir() -> str:
    """The folder of the documentation's scripts and styles (from ``fastapi-offline``)."""
    return str(resources.files("fastapi_offline").joinpath("static"))


FRAMING = {"X-Frame-Options": "DENY", "Content-Security-Policy": "frame-ancestors 'none'",
           "X-Content-Type-Options": "nosniff"}
"""The documentation pages may not be framed by another site (clickjacking of the "Authorize" form)."""


def install(api: FastAPI, openapi_url: str) -> None:
    """Add the documentation pages and their assets to ``api``."""
    api.mount(ASSETS, StaticFiles(directory=assets_dir()), name="docs-assets")

    @api.get("/v1/docs", include_in_schema=False)
    async def swagger(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}", title="jobloom API",
            swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js", swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS}/favicon.png",
        )
        page.headers.update(FRAMING)
        return page

    @api.get("/v1/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_redoc_html(
            openapi_url=f"{root}{openapi_url}", title="jobloom API", redoc_js_url=f"{root}{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS}/favicon.png", with_google_fonts=False,
        )
        page.headers.update(FRAMING)
        return page
