"""An app's runtime: the one object its parts work with, holding the very pieces the app shows, and no
part of ``jobloom.app`` describing the app with a protocol of its own."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import jobloom
from jobloom import App
from jobloom.app.runtime import Runtime
from jobloom.blobs import MAX_OFFLOADED_BYTES, Directory

APP_PACKAGE = Path(jobloom.__file__).parent / "app"


class Mail(jobloom.Performer[dict, None]):
    async def perform(self, payload: dict) -> None:
        return None


def test_the_app_shows_the_pieces_of_its_runtime(tmp_path: Path) -> None:
    app = App(f"sqlite:///{tmp_path}/a.db", performers=[Mail], blobs=Directory(tmp_path / "blobs"))
    rt = app.runtime
    assert isinstance(rt, Runtime)
    assert rt.specs is app.specs and rt.stores is app.stores and rt.codec is app.codec
    assert rt.middleware is app.middleware and rt.telemetry is app.telemetry and rt.hooks is app.hooks
    assert rt.offload is app.offload is not None and rt.lease == app.lease
    assert rt.spec(Mail) is app.spec("Mail") is app.specs["Mail"]
    assert app.specs["Mail"].max_bytes == MAX_OFFLOADED_BYTES  # lifted for the blob store, once the app was built
    with pytest.raises(dataclasses.FrozenInstanceError):
        rt.lease = 1.0  # type: ignore[misc]


def test_the_sync_bridge_starts_at_first_use_and_again_after_close_sync(tmp_path: Path) -> None:
    app = App(f"sqlite:///{tmp_path}/a.db", performers=[Mail], auto_migrate=True)
    assert not app.runtime.bridge.started
    app.close_sync()  # nothing to stop
    first = app.enqueue_sync(Mail, {})
    assert app.runtime.bridge.started
    app.close_sync()
    assert not app.runtime.bridge.started
    second = app.enqueue_sync(Mail, {})
    assert second.id > first.id
    app.close_sync()


def test_no_module_of_the_app_package_declares_a_protocol() -> None:
    found = []
    for path in sorted(APP_PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("Protocol") for b in node.bases):
                found.append(f"{path.name}: {node.name}")
    assert not found, "the app's parts take the runtime (jobloom.app.runtime), not a view of the App"
