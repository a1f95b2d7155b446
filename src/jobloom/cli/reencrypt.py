"""``jobloom reencrypt``: rewrite stored payloads, results, steps, event data and run inputs with the
app's codec (its first key), in batches, safely while workers run."""

from __future__ import annotations

from typing import Annotated

import typer

from jobloom.app.reencrypt import DEFAULT_BATCH, reencrypt
from jobloom.cli.common import AppOption, JsonOption, console, print_json, require_app, run


def reencrypt_command(
    ctx: typer.Context,
    app_ref: AppOption = None,
    batch: Annotated[int, typer.Option("--batch", min=1, max=10_000,
                                       help="Rows read and rewritten per transaction.")] = DEFAULT_BATCH,
    as_json: JsonOption = False,
) -> None:
    """Rewrite stored content not yet encrypted with the codec's first key (plaintext included).

    Each row is rewritten only if it still holds what was read, so workers may run meanwhile; run it
    again after an interruption to finish. Exits 1 if some rows no configured key opens."""
    app = require_app(ctx, app_ref, "jobloom reencrypt")
    if not app.codec.encrypts:
        console.print("the app has no encrypting codec (App(codec=jobloom.codecs.Encrypted(keys=[...]))): "
                      "nothing to do")
        raise typer.Exit(1)
    report = run(app, lambda a: reencrypt(a, batch=batch))
    if as_json:
        print_json({"rewritten": report.rewritten, "changed_meanwhile": report.changed_meanwhile,
                    "failed": report.failed})
    else:
        kinds = ", ".join(f"{n} {kind}" for kind, n in report.rewritten.items())
        console.print(f"rewritten: {report.total} ({kinds}); changed meanwhile: {report.changed_meanwhile}")
        for problem in report.failed:
            console.print(f"not rewritten: {problem}")
    if report.failed:
        raise typer.Exit(1)


__all__ = ["reencrypt_command"]
