"""How the command line reports a mistake in its own arguments, and how its help shows plain flags.

The parser's errors (an unknown option, a value of the wrong type, a missing argument) become one
``error:`` line on stderr that says what to give instead, with exit status 2, in the same style as
every other jobloom error; help lists a flag such as ``--json`` without a ``<bool>`` type.
"""

from __future__ import annotations

from typing import Any

KINDS = {int: "a whole number", float: "a number"}


def plain_flags(command: Any) -> Any:
    """``command`` (a built click command or group) with no type shown after its flags in help."""
    for param in getattr(command, "params", ()):
        _plain(param)
    help_option = getattr(command, "get_help_option", None)
    if help_option is not None:  # built on demand, so made plain as it is built

        def plain_help(ctx: Any, build: Any = help_option) -> Any:
            return _plain(build(ctx))

        command.get_help_option = plain_help
    for sub in getattr(command, "commands", {}).values():
        plain_flags(sub)
    return command


def _plain(param: Any) -> Any:
    if getattr(param, "is_flag", False) and param.metavar is None:
        param.metavar = ""
    return param


def _given(exc: BaseException) -> object:
    """The value the parser could not convert, when its validation error recorded it."""
    cause = exc.__cause__
    errors = getattr(cause, "errors", None)
    if callable(errors):
        try:
            found = errors()
        except Exception:  # an error type without pydantic's detail: say less
            return None
        if found and isinstance(found[0], dict):
            return found[0].get("input")
    return None


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text else text


def _takes_app_argument(ctx: Any) -> bool:
    """Whether the command takes the app as a positional ``MODULE:ATTR`` argument (``jobloom worker``)."""
    params = getattr(getattr(ctx, "command", None), "params", ())
    return any(not getattr(p, "opts", ["-"])[0].startswith("-") and getattr(p, "metavar", None) == "MODULE:ATTR"
               for p in params)


def usage_message(exc: Any) -> str:
    """One line for a parser error: what was wrong and what to give instead."""
    ctx = getattr(exc, "ctx", None)
    path = str(getattr(ctx, "command_path", "") or "jobloom")
    command = path.removeprefix("jobloom").strip() or "jobloom"
    see = f"see `{path} --help`"
    option = getattr(exc, "option_name", None)
    if type(exc).__name__ == "NoSuchOption" and option is not None:
        takes = {o for p in getattr(ctx.command, "params", ()) for o in getattr(p, "opts", ())} if ctx else set()
        if option == "--url" and "--app" in takes:
            return (f"{command} runs the app's own code, so it takes --app MODULE:ATTR (or JOBLOOM_APP), "
                    f"not --url")
        if option == "--app" and _takes_app_argument(ctx):
            return f"{command}: the app is the first argument: `{path} MODULE:ATTR`, not --app"
        if option == "--app" and "--url" in takes:
            return f"{command} takes --url URL (or JOBLOOM_URL), not --app"
        return f"{command}: {_lower_first(exc.format_message())}; {see}"
    param = getattr(exc, "param", None)
    if type(exc).__name__ == "BadParameter" and param is not None:
        opts = [o for o in param.opts if o.startswith("-")]
        name = "/".join(opts) if opts else str(getattr(param, "metavar", None) or param.name).upper()
        descriptor = getattr(param, "type_descriptor", None)
        kind = KINDS.get(getattr(descriptor, "annotation", None))  # type: ignore[arg-type]
        given = _given(exc)
        shown = "" if given is None else f" {given!r}"
        message = str(exc.message)
        detail = message.split(": ", 1)[1] if message.startswith("Invalid value for") and ": " in message else message
        if kind is not None and "unable to parse" in detail:
            return f"{command}: {name}{shown} is not {kind}: give {kind} ({see})"
        return f"{command}: invalid {name}{shown}: {_lower_first(detail)} ({see})"
    text = _lower_first(str(exc.format_message())).rstrip(".")
    return f"{text} ({see})" if command == "jobloom" else f"{command}: {text} ({see})"


def visible_commands(group: Any, path: tuple[str, ...] = ()) -> list[list[str]]:
    """Every visible command under ``group`` (a built click group), depth first, in the order the group
    lists them, each as its path of names (the docs' CLI reference and the help tests walk it)."""
    import click

    found: list[list[str]] = []
    ctx = click.Context(group, info_name="jobloom")  # typer's own click too: groups are told by list_commands
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        if sub is None or sub.hidden:
            continue
        found.append([*path, name])
        if hasattr(sub, "list_commands"):
            found.extend(visible_commands(sub, (*path, name)))
    return found
