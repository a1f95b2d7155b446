"""Every error jobloom raises derives from :class:`JobloomError`; one subclass per kind."""

from __future__ import annotations


class JobloomError(Exception):
    """Base class of every error jobloom raises."""


class UnknownBinding(JobloomError):
    """A job names a binding (performer) that the app does not know."""

    def __init__(self, binding: str, known: list[str] | None = None, *, why: str | None = None) -> None:
        self.binding = binding
        hint = f"; known bindings: {', '.join(sorted(known))}" if known else ""
        super().__init__(f"unknown binding {binding!r}" + (f": {why}" if why else "") + hint)


class InvalidPayload(JobloomError):
    """A payload does not match its performer's payload type."""

    def __init__(self, binding: str, detail: str) -> None:
        self.binding = binding
        self.detail = detail
        super().__init__(f"invalid payload for {binding}: {detail}")


class PayloadTooLarge(JobloomError):
    """A payload (or a result) is larger than the limit."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"{what} is {size} bytes; the limit is {limit} bytes")


class PayloadOffloaded(JobloomError):
    """A job read in a list holds a reference to an offloaded payload or result, not its content:
    ``App.get_job`` (or ``App.wait``) reads it from the blob store."""

    def __init__(self, job_id: int, what: str, ref: str) -> None:
        self.job_id = job_id
        self.ref = ref
        super().__init__(f"the {what} of job {job_id} is offloaded to the blob store ({ref}); "
                         f"read the job with app.get_job({job_id}) to load it")


class InvalidTransition(JobloomError):
    """A state change that the job state machine does not allow."""

    def __init__(self, job_id: int, state: str, action: str) -> None:
        self.job_id = job_id
        self.state = state
        self.action = action
        super().__init__(f"cannot {action} job {job_id}: it is {state}")


class InvalidOption(JobloomError):
    """An option (performer attribute or enqueue argument) has a value that is not accepted."""

    def __init__(self, option: str, value: object, expected: str, binding: str | None = None) -> None:
        self.option = option
        self.value = value
        where = f" on {binding}" if binding else ""
        super().__init__(f"invalid {option}{where}: {shown(value)}; expected {expected}")


def shown(value: object, width: int = 120) -> str:
    """``repr(value)`` for a one-line message: a long one is cut, saying how long it was."""
    try:
        text = repr(value)
    except RecursionError:  # nested too deep for repr: show the outer levels only
        import reprlib

        text = reprlib.repr(value)
    return text if len(text) <= width else f"{text[:width - 20]}... ({len(text)} characters)"


class JobNotFound(JobloomError):
    """No job with that id exists (it may have been pruned)."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        super().__init__(f"no job with id {job_id}")


class BatchNotFound(JobloomError):
    """No batch with that id exists."""

    def __init__(self, batch_id: int) -> None:
        self.batch_id = batch_id
        super().__init__(f"no batch with id {batch_id}")


class StoreError(JobloomError):
    """The store cannot be used (bad URL, missing migrations, unreachable server)."""


class StoreUnreachable(StoreError):
    """The database server refused connections for as long as the caller was willing to wait."""

    def __init__(self, message: str, address: str, waited: float) -> None:
        self.address = address
        """``host:port`` that was tried."""
        self.waited = waited
        """Seconds spent waiting before giving up."""
        super().__init__(message)


class CommitUnknown(StoreError):
    """The connection broke during COMMIT: the transaction may or may not have been applied.

    jobloom never runs such a transaction again by itself. A worker gives back any jobs it may have
    claimed in it and reports its outcomes again (reports are idempotent); an enqueue that raises
    this may have created its job.
    """


class MigrationsMissing(StoreError):
    """The store lacks migrations that this version of jobloom needs."""

    def __init__(self, missing: list[str], where: str = "", *, none_applied: bool = False) -> None:
        self.missing = missing
        self.where = where
        at = f" ({where})" if where else ""
        if none_applied:
            schema = where.startswith("schema ")
            super().__init__(
                f"no jobloom tables in the store{at}: run `jobloom migrate`"
                + (" (with the same --schema) to create them, or check the URL and --schema" if schema
                   else " to create them, or check the URL")
            )
            return
        super().__init__(
            f"the store{at} is missing migrations: " + ", ".join(missing) + "; run `jobloom migrate` first"
        )


class MigrationsTooOld(StoreError):
    """The store was migrated part of the way by jobloom 0.2: it records some of that version's
    migrations 0001 to 0027, not all. This version starts from their baseline and cannot apply the rest;
    jobloom 0.2's ``jobloom migrate`` can (``docs/how-to/upgrades.md``). Nothing was changed."""

    def __init__(self, last: str, count: int, baseline: int, where: str = "") -> None:
        self.last = last
        """The name of the last migration the store records."""
        self.count = count
        """How many of 0.2's migrations (1 to ``baseline``) it records."""
        self.baseline = baseline
        self.where = where
        at = f" ({where})" if where else ""
        super().__init__(
            f"the store{at} records {count} of jobloom 0.2's migrations 0001 to {baseline:04d} (the last: {last}): "
            f"this version of jobloom starts from their baseline, {baseline:04d}_baseline, and cannot apply "
            "the rest. Upgrade in two steps: install the last jobloom 0.2 release (pip install 'jobloom>=0.2,<0.3'), "
            "run `jobloom migrate` with it, then install this version again (docs/how-to/upgrades.md)"
        )

    def at(self, where: str) -> MigrationsTooOld:
        """The same error, naming where the store is (a SQLite file, a PostgreSQL schema)."""
        return MigrationsTooOld(self.last, self.count, self.baseline, where)


class ClaimRefused(JobloomError):
    """A remote worker's heartbeat or report that does not present its attempt's claim secret, or a
    binding-limited worker token that names another binding: refused, and nothing changed."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.api_field = field


class JobTimeout(JobloomError):
    """An attempt ran longer than its timeout (recorded as the attempt's error)."""


class WaitTimeout(JobloomError):
    """``App.wait`` gave up before the job finished."""


