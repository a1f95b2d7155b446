"""Performers: the classes that do one kind of work, with their options and typed payloads."""

from __future__ import annotations

import importlib
import inspect
import sys
import typing
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import pydantic
from pydantic_core import PydanticSerializationError

from jobloom.core import options as opt
from jobloom.core.errors import InvalidOption, InvalidPayload, JobloomError, PayloadTooLarge
from jobloom.core.lifecycle import DEFAULT_MAX_SNOOZES
from jobloom.core.options import Backoff, Delivery, RateLimit
from jobloom.core.text import MAX_KEY_BYTES, MAX_NAME_BYTES, check_name, dumped_problem
from jobloom.core.types import AttemptControl, JobContext, Policy
from jobloom.engine.payload_keys import Checker, key_checker
from jobloom.engine.step_options import step_options
from jobloom.engine.steps import StepContext
from jobloom.engine.topics import check_triggers

P = TypeVar("P")
R = TypeVar("R")

MAX_PAYLOAD_BYTES = 128 * 1024
MAX_RESULT_BYTES = 128 * 1024


class Performer(Generic[P, R]):
    """Subclass and implement ``perform``; class attributes are the binding's options
    (see the option table in docs/reference/configuration.md).

    ``async def perform`` runs on the worker's event loop; a plain ``def perform`` runs in a thread,
    or in a child process with ``isolation = "process"`` (so that a timeout or a cancel can kill it).
    """

    binding: ClassVar[str | None] = None
    priority: ClassVar[int] = 0
    max_attempts: ClassVar[int] = 3
    backoff: ClassVar[Backoff] = Backoff()
    timeout: ClassVar[float | None] = 60.0
    delivery: ClassVar[Delivery] = "at_least_once"
    concurrency: ClassVar[int | None] = None
    concurrency_key: ClassVar[Any] = None
    key_concurrency: ClassVar[int] = 1
    rate_limit: ClassVar[str | RateLimit | None] = None
    priority_aging: ClassVar[float | None] = 60.0
    fairness: ClassVar[str | None] = None
    """``"round_robin"``: the concurrency keys take turns (see docs/how-to/fairness.md); None: by priority."""
    key_weights: ClassVar[dict[str, int] | None] = None
    """Under round-robin fairness, how many starts in a row a key's turn has (others: 1)."""
    key_rate_limit: ClassVar[str | RateLimit | None] = None
    """A token bucket per concurrency key, as ``rate_limit`` is for the binding (both must allow a start)."""
    unique_for: ClassVar[float] = 24 * 3600.0
    expires_in: ClassVar[float | None] = None
    """Seconds after its enqueue by which a job must have started, or it never starts (ends ``expired``);
    ``None``: never expires. An enqueue's ``expires_in=`` or ``expires_at=`` replaces it."""
    retention: ClassVar[dict[str, float] | float | None] = None
    isolation: ClassVar[str] = "thread"
    pushes: ClassVar[bool] = False
    """Whether each attempt is an HTTP request that the worker's pooled client sends (``HttpPerformer``)."""
    max_snoozes: ClassVar[int] = DEFAULT_MAX_SNOOZES
    version: ClassVar[int] = 1
    triggers: ClassVar[Sequence[str]] = ()
    """Topics this binding subscribes to: each :meth:`App.publish` of one enqueues a job of it."""
    """The version of this performer's durable code: stored with each job it first runs, read back as
    ``self.ctx.version`` when a job resumes (see docs/how-to/durable-steps.md, "Change durable code")."""
    hook_lease: ClassVar[float] = 60.0
    """Seconds a worker holds a lifecycle hook (``on_success``, ``on_failure``, ``on_retry``) it runs; a hook
    not done by then (its worker died) is run again by another worker of the binding."""
    unknown_keys: ClassVar[str] = "refuse"
    """A payload key that the payload type does not declare: ``"refuse"`` it at enqueue (naming the key),
    or ``"drop"`` it silently, as pydantic does (for callers that send more than this version reads)."""

    ctx: JobContext
    env: Any
    _steps: StepContext
    _calls: Any  # the attempt's jobloom.engine.calls.Calls

    def step(self, name: str, fn: Callable[..., Any], *args: Any, retries: int = 0, backoff: Backoff | None = None,
             timeout: float | None = None) -> Any:
        """Run ``fn(*args)`` once for this job; on later attempts return its remembered result (as JSON).

        ``retries``: runs again after an exception, up to that many times, waiting ``backoff`` between
        (a ``jobloom.Backoff``; exponential from 1 s up to 60 s by default), before the exception reaches
        ``perform``. ``timeout``: seconds one run may take, after which it is cancelled and raises
        ``jobloom.StepTimeout`` (counted by ``retries``). ``await`` it in an async ``perform``; in a plain
        ``def perform`` it returns the result (``fn`` runs in the job's thread)."""
        steps, control = self._durable()
        options = step_options(name, retries, backoff, timeout, self.ctx.binding)
        if control is not None:
            return steps.step_sync(control, name, fn, *args, options=options)
        return steps.step(name, fn, *args, options=options)

    def sleep(self, name: str, seconds: float) -> Any:
        """Suspend the job for ``seconds`` without holding a worker, a slot or an attempt.

        ``await`` it in an async ``perform``; call it in a plain ``def perform``."""
        steps, control = self._durable()
        return steps.sleep(name, seconds) if control is None else control.call(steps.sleep(name, seconds))

    def wait_for_event(self, name: str, timeout: float | None = None) -> Any:
        """Suspend until ``app.send_event(job_id, name, data)``; return ``data`` (``EventTimeout`` on timeout).

        ``await`` it in an async ``perform``; in a plain ``def perform`` it returns ``data``."""
        steps, control = self._durable()
        wait = steps.wait_for_event(name, timeout)
        return wait if control is None else control.call(wait)

    def call(self, performer: Any, payload: Any, *, name: str | None = None, **options: Any) -> Any:
        """Enqueue a child job once and wait for it: its result, or ``jobloom.ChildFailed`` if it did not succeed.

        The caller is suspended (no worker, no slot, no attempt spent) until the child ends, then runs
        again from the top, where the same call returns at once. A call is known by ``name``, or else by
        its place among the job's calls (``#1``, ``#2``...). ``options`` are those of ``App.enqueue``
        (not ``unique_key``). ``await`` it in an async ``perform`` (calls awaited together with
        ``asyncio.gather`` make all their children before the caller suspends); in a plain ``def
        perform`` it returns the result."""
        _, control = self._durable()
        calls = self._calls
        work = calls.call(calls.name(name), performer, payload, options)
        return work if control is None else control.call(work)

    def _durable(self) -> tuple[StepContext, AttemptControl | None]:
        """The attempt's steps, and its control if ``perform`` is sync (the calls then block)."""
        steps = getattr(self, "_steps", None)
        if steps is None:
            raise JobloomError("durable steps are only available inside a running job, and not in a "
                               "process-isolated one")
        control = self.ctx.control
        return steps, (control if control is not None and control.sync else None)

    def perform(self, payload: P) -> R | Awaitable[R]:  # pragma: no cover - always overridden
        """Do the work for one payload; the return value is stored as the job's result.

        Override it as ``async def perform(self, payload: P) -> R`` or as a plain ``def``.
        """
        raise NotImplementedError

    @classmethod
    def check_options(cls, binding: str) -> None:
        """Refuse bad values of options that a kind of performer adds (``InvalidOption``); checked once."""


def give_durable(performer: Performer[Any, Any], steps: StepContext, calls: Any) -> None:
    """Give ``performer`` its attempt's durable steps and calls (``calls``: a
    :class:`jobloom.engine.calls.Calls`), which ``step``, ``sleep``, ``wait_for_event`` and ``call`` use."""
    performer._steps = steps
    performer._calls = calls


@dataclass(frozen=True, slots=True)
class PerformerSpec:
    """A performer class with its options checked and its payload and result codecs prepared."""

    cls: type[Performer[Any, Any]]
    binding: str
    priority: int
    max_attempts: int
    backoff: Backoff
    timeout: float | None
    delivery: Delivery
    policy: Policy
    concurrency_key: Any
    unique_for: float
    retention: dict[str, float]
    is_async: bool
    isolation: str
    payload_adapter: pydantic.TypeAdapter[Any]
    result_adapter: pydantic.TypeAdapter[Any]
    nulls_may_hide_nan: bool = True  # a payload or result type whose own config may write NaN as null
    push: bool = False  # an HttpPerformer: the worker hands it its pooled HTTP client
    remote: Any = None  # the RemoteBinding of a binding run by remote workers (never by this app's)
    max_snoozes: int = DEFAULT_MAX_SNOOZES
    expires_in: float | None = None  # a job not started this long after its enqueue ends expired
    key_check: Checker | None = None  # finds a payload key the type would drop (None: none can be, or "drop")
    version: int = 1  # the performer's version (stored with the jobs it first runs)
    triggers: tuple[str, ...] = ()  # the topics it subscribes to (App.publish)
    hooks: frozenset[str] = frozenset()  # its lifecycle hooks: "success", "failure", "retry"
    hook_lease: float = 60.0  # seconds a worker holds a hook it runs
    max_bytes: int | None = None  # the payload and result limit (None: MAX_PAYLOAD_BYTES, MAX_RESULT_BYTES)

    def dump_payload(self, payload: Any, *, check_keys: bool = True) -> str:
        """Validate ``payload`` against the payload type and encode it as JSON (``check_keys=False``:
        keys the type does not declare are dropped, for payloads built from other jobs' results)."""
        return self.encode_payload(self.validate_payload(payload, check_keys=check_keys))

    def validate_payload(self, payload: Any, *, check_keys: bool = True) -> Any:
        """``payload`` as the payload type (validated); a key that the type does not declare is refused
        unless the performer says ``unknown_keys = "drop"`` (or ``check_keys`` is False)."""
        unknown = None
        if check_keys and self.key_check is not None and isinstance(payload, dict):
            unknown = self.key_check(payload, "")
        try:
            value = self.payload_adapter.validate_python(payload)
        except pydantic.ValidationError as exc:
            extra = f"; unknown key {unknown!r}" if unknown is not None else ""
            raise InvalidPayload(self.binding, describe_validation(exc) + extra) from None
        if unknown is not None:
            raise InvalidPayload(self.binding, f"unknown key {unknown!r}: the payload type has no such field "
                                 f"(a performer that should drop such keys sets unknown_keys = \"drop\")")
        return value

    def encode_payload(self, value: Any) -> str:
        """A validated payload as JSON, refusing one over the size limit or one JSON cannot hold."""
        try:
            data = self.payload_adapter.dump_json(value)
        except PydanticSerializationError as exc:
            raise InvalidPayload(self.binding, str(exc)) from None
        limit = MAX_PAYLOAD_BYTES if self.max_bytes is None else self.max_bytes
        if len(data) > limit:
            raise PayloadTooLarge(f"payload for {self.binding}", len(data), limit)
        problem = dumped_problem(data, lambda: self.payload_adapter.dump_python(value),
                                 nulls_may_hide_nan=self.nulls_may_hide_nan)
        if problem is not None:
            raise InvalidPayload(self.binding, f"cannot be stored as JSON: {problem}")
        return data.decode()

    def load_payload(self, data: str) -> Any:
        """Decode a stored payload into the performer's payload type."""
        try:
            return self.payload_adapter.validate_json(data)
        except pydantic.ValidationError as exc:
            raise InvalidPayload(self.binding, describe_validation(exc)) from None

    def dump_result(self, result: Any) -> str | None:
        """Encode a result as JSON, refusing one over the size limit."""
        if result is None:
            return None
        try:
            data = self.result_adapter.dump_json(result)
        except (PydanticSerializationError, ValueError) as exc:
            raise InvalidPayload(self.binding, f"result cannot be stored as JSON: {exc}") from None
        limit = MAX_RESULT_BYTES if self.max_bytes is None else self.max_bytes
        if len(data) > limit:
            raise PayloadTooLarge(f"result of {self.binding}", len(data), limit)
        problem = dumped_problem(data, lambda: self.result_adapter.dump_python(result),
                                 nulls_may_hide_nan=self.nulls_may_hide_nan)
        if problem is not None:
            raise InvalidPayload(self.binding, f"result cannot be stored as JSON: {problem}")
        return data.decode()

    def key_for(self, payload: Any) -> str | None:
        """The concurrency key of a (validated) payload, from the ``concurrency_key`` function."""
        fn = self.concurrency_key
        if fn is None:
            return None
        key = fn(payload)
        return None if key is None else check_name("concurrency_key", str(key), MAX_KEY_BYTES, self.binding)


def check_local(spec: PerformerSpec, signing_secret: bytes | None) -> None:
    """Refuse to run ``spec``'s jobs in this app's workers when they cannot be: a remote binding (remote
    workers claim its jobs), or a push performer while the app has no ``signing_secret``."""
    if spec.remote is not None:
        raise InvalidOption("bindings", spec.binding, "bindings this app performs (a RemoteBinding's jobs are "
                            "claimed by remote workers)", spec.binding)
    if spec.push and signing_secret is None and getattr(spec.cls, "signing_secret", None) is None:
        raise InvalidOption("signing_secret", None, f"App(signing_secret=...) to sign the requests of the "
                            f"HttpPerformer {spec.binding}", spec.binding)


def describe_validation(exc: pydantic.ValidationError) -> str:
    """A one-line account of what did not validate: which field, what was expected, what came."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "payload"
        parts.append(f"field {loc!r}: {err['msg']} (got {err.get('input')!r})")
    return "; ".join(parts)


def _type_args(cls: type) -> tuple[Any, Any]:
    for klass in cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            origin = typing.get_origin(base)
            if isinstance(origin, type) and issubclass(origin, Performer):
                args = typing.get_args(base)
                if len(args) == 2 and not any(isinstance(a, TypeVar) for a in args):
                    return args[0], args[1]
    return Any, Any


def retention_of(value: Any, binding: str) -> dict[str, float]:
    """Seconds a finished job is kept, by state: the defaults, with ``value`` (a performer's ``retention``
    option, checked and refused naming ``binding``) over them."""
    base = {"succeeded": 86400.0, "failed": 7 * 86400.0, "stalled": 7 * 86400.0, "cancelled": 7 * 86400.0,
            "skipped": 7 * 86400.0, "expired": 7 * 86400.0}
    if value is None:
        return base
    if isinstance(value, int | float) and not isinstance(value, bool):
        return dict.fromkeys(base, float(value))
    if isinstance(value, dict):
        for state, secs in value.items():
            if state not in base:
                raise InvalidOption("retention", value, f"keys among {sorted(base)}", binding)
            base[state] = opt.seconds(f"retention[{state!r}]", secs, binding, allow_none=False) or 0.0
        return base
    raise InvalidOption("retention", value, "seconds, or a dict of state -> seconds", binding)


def resolve_class(module: str, qualname: str) -> type | None:
    """The class named ``module.qualname`` (importing the module), or None if that name finds no class."""
    try:
        obj: Any = sys.modules.get(module) or importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    return obj if isinstance(obj, type) else None


def _isolation(cls: type[Performer[Any, Any]], binding: str, is_async: bool) -> str:
    value = cls.isolation
    if value not in ("thread", "process"):
        raise InvalidOption("isolation", value, '"thread" or "process"', binding)
    if value == "process":
        if is_async:
            raise InvalidOption("isolation", value, 'a plain "def perform" (an async perform runs on the event loop)',
                                binding)
        where = f"{cls.__module__}.{cls.__qualname__}"
        if cls.__module__ == "__main__" or resolve_class(cls.__module__, cls.__qualname__) is not cls:
            raise InvalidOption("isolation", value, f"a performer class importable by module path ({where} is "
                                "not: define it at the top level of an importable module)", binding)
    return str(value)


def _batching(cls: type[Performer[Any, Any]], binding: str) -> tuple[int | None, float]:
    """A batch performer's ``batch_size`` and ``batch_wait`` (checked); ``(None, 0.0)`` for any other."""
    run = getattr(cls, "perform_batch", None)
    if run is None:
        return None, 0.0
    if not inspect.iscoroutinefunction(run):
        raise InvalidOption("perform_batch", run, "an async def perform_batch(self, items)", binding)
    size = opt.positive_int("batch_size", getattr(cls, "batch_size", None), binding, allow_none=False) or 1
    wait = opt.seconds("batch_wait", getattr(cls, "batch_wait", None), binding, allow_none=False) or 0.0
    return size, wait


FAIRNESS = ("round_robin",)
"""The values of a performer's ``fairness`` (besides None)."""


def _key_limits(
    cls: type[Performer[Any, Any]], binding: str, *, batched: bool
) -> tuple[str | None, tuple[tuple[str, int], ...], RateLimit | None]:
    """Check a performer's limits between keys: ``fairness``, ``key_weights`` and ``key_rate_limit``."""
    fairness, weights, key_rate = cls.fairness, cls.key_weights, cls.key_rate_limit
    keyed = cls.concurrency_key is not None
    if fairness is not None and fairness not in FAIRNESS:
        raise InvalidOption("fairness", fairness, "'round_robin' or None", binding)
    if fairness is not None and (not keyed or batched):
        raise InvalidOption("fairness", fairness, "None on a performer without a concurrency_key or with "
                            "perform_batch (the keys take turns)", binding)
    if weights is not None and (not isinstance(weights, dict) or fairness is None or not all(
            isinstance(k, str) and isinstance(w, int) and not isinstance(w, bool) and 1 <= w <= 1000
            for k, w in weights.items())):
        raise InvalidOption("key_weights", weights, "a dict of key -> turns in a row (1 to 1000), with "
                            "fairness = 'round_robin'", binding)
    rate = None if key_rate is None else RateLimit.parse(key_rate, binding, "key_rate_limit")
    if rate is not None and not keyed:
        raise InvalidOption("key_rate_limit", key_rate, "None on a performer without a concurrency_key", binding)
    return fairness, tuple(sorted((weights or {}).items())), rate


def inspect_performer(cls: type[Performer[Any, Any]]) -> PerformerSpec:
    """Check a performer class's options and build its spec; bad options raise ``InvalidOption``."""
    if not (isinstance(cls, type) and issubclass(cls, Performer)):
        raise InvalidOption("performers", cls, "subclasses of jobloom.Performer")
    binding = check_name("binding", cls.binding or cls.__name__, MAX_NAME_BYTES)
    if cls.perform is Performer.perform:
        raise InvalidOption("perform", cls, "a perform(self, payload) method", binding)
    backoff = cls.backoff
    if not isinstance(backoff, Backoff):
        raise InvalidOption("backoff", backoff, "a jobloom.Backoff", binding)
    opt.integer("priority", cls.priority, binding)
    rate = None if cls.rate_limit is None else RateLimit.parse(cls.rate_limit, binding)
    key_fn = cls.concurrency_key
    if key_fn is not None and not callable(key_fn):
        raise InvalidOption("concurrency_key", key_fn, "a function payload -> str | None", binding)
    batch_size, batch_wait = _batching(cls, binding)
    fairness, weights, key_rate = _key_limits(cls, binding, batched=batch_size is not None)
    policy = Policy(
        fairness=fairness, key_weights=weights, key_rate=key_rate,
        batch_size=batch_size, batch_wait=batch_wait,
        concurrency=opt.concurrency(cls.concurrency, binding),
        key_concurrency=opt.positive_int("key_concurrency", cls.key_concurrency, binding, allow_none=False) or 1,
        rate=rate,
        priority_aging=opt.seconds("priority_aging", cls.priority_aging, binding) or None,
    )
    payload_t, result_t = _type_args(cls)
    payload_adapter, payload_nulls = _adapter(payload_t)
    result_adapter, result_nulls = _adapter(result_t)
    is_async = batch_size is not None or inspect.iscoroutinefunction(cls.perform)
    cls.check_options(binding)
    if isinstance(key_fn, staticmethod):
        key_fn = key_fn.__func__
    return PerformerSpec(
        cls=cls,
        binding=binding,
        priority=cls.priority,
        max_attempts=opt.positive_int("max_attempts", cls.max_attempts, binding, allow_none=False) or 1,
        backoff=backoff,
        timeout=opt.seconds("timeout", cls.timeout, binding),
        delivery=opt.delivery(cls.delivery, binding),
        policy=policy,
        concurrency_key=key_fn,
        unique_for=opt.seconds("unique_for", cls.unique_for, binding, allow_none=False) or 0.0,
        retention=retention_of(cls.retention, binding),
        is_async=is_async,
        isolation=_isolation(cls, binding, is_async),
        payload_adapter=payload_adapter,
        result_adapter=result_adapter,
        nulls_may_hide_nan=payload_nulls or result_nulls,
        push=bool(cls.pushes),
        max_snoozes=opt.positive_int("max_snoozes", cls.max_snoozes, binding, allow_none=False) or 1,
        key_check=_key_check(cls, binding, payload_adapter),
        expires_in=_expires_in(cls.expires_in, binding),
        version=opt.positive_int("version", cls.version, binding, allow_none=False) or 1,
        triggers=check_triggers(cls.triggers, binding),
        hooks=_hooks(cls, binding),
        hook_lease=opt.finite("hook_lease", cls.hook_lease, binding, minimum=0.0, above=True, maximum=opt.MAX_DELAY),
    )


HOOKS = {"on_success": "success", "on_failure": "failure", "on_retry": "retry"}
"""A performer's lifecycle hook methods, by the kind of outcome that runs them."""


def _hooks(cls: type[Performer[Any, Any]], binding: str) -> frozenset[str]:
    """The lifecycle hooks a performer defines, each checked to be an ``async def``."""
    kinds = set()
    for name, kind in HOOKS.items():
        fn = getattr(cls, name, None)
        if fn is None:
            continue
        if not inspect.iscoroutinefunction(fn):
            raise InvalidOption(name, fn, f"an async def {name}(self, ...) (lifecycle hooks run on the worker's "
                                "event loop)", binding)
        kinds.add(kind)
    return frozenset(kinds)


def _expires_in(value: object, binding: str) -> float | None:
    """Check a performer's ``expires_in``: None, or seconds > 0 (a job must have some time to start)."""
    if value is None:
        return None
    return opt.finite("expires_in", value, binding, minimum=0.0, above=True, maximum=opt.MAX_DELAY)


def _key_check(cls: type[Performer[Any, Any]], binding: str, adapter: pydantic.TypeAdapter[Any]) -> Checker | None:
    value = cls.unknown_keys
    if value not in ("refuse", "drop"):
        raise InvalidOption("unknown_keys", value, '"refuse" or "drop"', binding)
    return key_checker(adapter.core_schema) if value == "refuse" else None


_OWN_CONFIG = ("'type': 'model'", "'type': 'dataclass'", "'type': 'typed-dict'")


def _adapter(t: Any) -> tuple[pydantic.TypeAdapter[Any], bool]:
    """A type adapter that writes NaN and infinities as JSON constants (so that they can be found and
    refused), and whether parts of the type keep their own config (which may write them as null)."""
    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(
            t, config=pydantic.ConfigDict(ser_json_inf_nan="constants"))
    except pydantic.PydanticUserError:  # a model, dataclass or TypedDict: it has its own config
        return pydantic.TypeAdapter(t), True
    schema = str(adapter.core_schema)
    return adapter, any(kind in schema for kind in _OWN_CONFIG)
