"""The named queries that return rows, each with the record of its rows (:mod:`jobloom.core.rows`).

``await tx.fetch(Q.claim, params)`` runs the dialect's ``claim`` query and returns ``ClaimRow``
records, typed for mypy. Statements that return no rows are run by name (``tx.execute("name")``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from jobloom.core.call_rows import CallChildRow, ChildStateRow, ParentRow, VersionRow
from jobloom.core.dep_rows import BatchRow, CountdownRow, DependencyRow, EdgeRow, LinkRow, SkippedRow, StateNRow
from jobloom.core.rows import (
    AttemptKeyRow,
    AttemptRow,
    BindingMomentRow,
    BindingOfRow,
    BindingRow,
    CandidateRow,
    ChildCountRow,
    ChildRow,
    ClaimRow,
    CountRow,
    CursorRow,
    EventRow,
    FoldedEventsRow,
    HeartbeatRow,
    HeldRow,
    JobIdRow,
    JobRow,
    JobRunRow,
    JobStateRow,
    KeyCountRow,
    LockedJobRow,
    MomentRow,
    MovedRow,
    NewChildRow,
    NodeJobRow,
    NodeResultRow,
    NodeRow,
    NodeStateRow,
    NoteRow,
    PolicyRow,
    PriorAttemptRow,
    ProjectedEventRow,
    ProjectorRow,
    PruneRow,
    RemoteAttemptRow,
    RemoteBeatRow,
    RetentionRow,
    RulesRow,
    RunIdRow,
    RunJobRow,
    RunningRow,
    RunRow,
    RunsJobRow,
    RunStateRow,
    SignalRow,
    SnoozeRow,
    StateCountRow,
    StatsRow,
    StepRow,
    StoredScheduleRow,
    TokenRow,
    UniqueRow,
    WorkerRow,
)
from jobloom.core.timing_rows import DebouncedRow, ExpiredRow, JobTimingRow

R = TypeVar("R", bound=tuple[Any, ...])


class Query(Generic[R]):
    """A named query (its name in the dialects' ``queries*.sql``) and the record of its rows."""

    __slots__ = ("make", "name", "row")

    def __init__(self, name: str, row: type[R]) -> None:
        self.name = name
        self.row = row
        # the record straight from the row's tuple (no length check: tests/conformance/test_rows.py
        # checks every record against its query's columns)
        self.make: Callable[[Iterable[Any]], R] = functools.partial(tuple.__new__, row)

    def __repr__(self) -> str:
        return f"Query({self.name!r}, {self.row.__name__})"


class Q:
    """The named queries that return rows, each with the record of its rows."""

    get_job = Query("get_job", JobRow)
    search_all = Query("search_all", JobRow)
    top_job_id = Query("top_job_id", CountRow)
    search_tagged = Query("search_tagged", JobRow)
    search_unique = Query("search_unique", JobRow)
    search_counted = Query("search_counted", JobRow)
    search_queued = Query("search_queued", JobRow)
    search_scheduled = Query("search_scheduled", JobRow)
    search_running = Query("search_running", JobRow)
    search_bindings_counted = Query("search_bindings_counted", BindingOfRow)
    search_bindings_queued = Query("search_bindings_queued", BindingOfRow)
    lock_jobs = Query("lock_jobs", LockedJobRow)
    pick_deletable = Query("pick_deletable", PruneRow)
    claim = Query("claim", ClaimRow)
    claim_batch = Query("claim_batch", ClaimRow)
    cancel_unstarted = Query("cancel_unstarted", MovedRow)
    fail_unstarted = Query("fail_unstarted", MovedRow)
    promote_due = Query("promote_due", MovedRow)
    expire_due = Query("expire_due", ExpiredRow)
    queue_waiting = Query("queue_waiting", MovedRow)
    settle_node = Query("settle_node", MovedRow)
    skip_waiting = Query("skip_waiting", MovedRow)
    wake_node = Query("wake_node", MovedRow)
    wake_suspended = Query("wake_suspended", MovedRow)
    wake_waiting_for = Query("wake_waiting_for", MovedRow)
    candidates_by_age = Query("candidates_by_age", CandidateRow)
    candidates_by_priority = Query("candidates_by_priority", CandidateRow)
    expired_leases = Query("expired_leases", RunningRow)
    lock_expired = Query("lock_expired", RunningRow)
    lock_running = Query("lock_running", RunningRow)
    lock_job = Query("lock_job", LockedJobRow)
    lock_dependencies = Query("lock_dependencies", DependencyRow)
    close_dependencies = Query("close_dependencies", EdgeRow)
    count_down_dependencies = Query("count_down_dependencies", CountdownRow)
    release_dependant = Query("release_dependant", MovedRow)
    skip_dependant = Query("skip_dependant", SkippedRow)
    dependencies_of = Query("dependencies_of", LinkRow)
    dependants_of = Query("dependants_of", LinkRow)
    insert_batch = Query("insert_batch", JobIdRow)
    get_batch = Query("get_batch", BatchRow)
    lock_batch = Query("lock_batch", BatchRow)
    batch_counts = Query("batch_counts", StateNRow)
    batch_job_ids = Query("batch_job_ids", JobIdRow)
    batch_of_job = Query("batch_of_job", JobIdRow)
    lock_running_attempt = Query("lock_running_attempt", JobIdRow)
    count_up_dependencies = Query("count_up_dependencies", CountdownRow)
    running_of_worker = Query("running_of_worker", HeldRow)
    heartbeat = Query("heartbeat", HeartbeatRow)
    heartbeat_remote = Query("heartbeat_remote", RemoteBeatRow)
    remote_attempts = Query("remote_attempts", RemoteAttemptRow)
    cancel_requests = Query("cancel_requests", AttemptKeyRow)
    find_unique = Query("find_unique", UniqueRow)
    find_debounced = Query("find_debounced", DebouncedRow)
    job_timing = Query("job_timing", JobTimingRow)
    get_binding = Query("get_binding", PolicyRow)
    lock_binding = Query("lock_binding", PolicyRow)
    try_lock_binding = Query("try_lock_binding", PolicyRow)
    list_bindings = Query("list_bindings", BindingRow)
    running_by_key = Query("running_by_key", KeyCountRow)
    count_by_state = Query("count_by_state", StateCountRow)
    count_by_state_indexed = Query("count_by_state_indexed", StateCountRow)
    count_running = Query("count_running", CountRow)
    count_running_batches = Query("count_running_batches", CountRow)
    list_workers = Query("list_workers", WorkerRow)
    get_snoozes = Query("get_snoozes", SnoozeRow)
    count_unprojected = Query("count_unprojected", CountRow)
    oldest_queued = Query("oldest_queued", MomentRow)
    job_notes = Query("job_notes", NoteRow)
    run_top_jobs = Query("run_top_jobs", RunJobRow)
    run_child_counts = Query("run_child_counts", ChildCountRow)
    run_children_page = Query("run_children_page", RunJobRow)
    overdue_scheduled = Query("overdue_scheduled", BindingMomentRow)
    next_lease_expiry = Query("next_lease_expiry", MomentRow)
    next_run_deadline = Query("next_run_deadline", MomentRow)
    next_scheduled = Query("next_scheduled", MomentRow)
    next_expiry = Query("next_expiry", MomentRow)
    fail_attempt = Query("fail_attempt", BindingOfRow)
    lock_pruned_runs = Query("lock_pruned_runs", RunIdRow)
    lock_run_skip = Query("lock_run_skip", RunIdRow)
    runs_past_deadline = Query("runs_past_deadline", RunIdRow)
    job_run = Query("job_run", JobRunRow)
    schedule_job_state = Query("schedule_job_state", JobStateRow)
    get_attempt = Query("get_attempt", PriorAttemptRow)
    get_attempts = Query("get_attempts", AttemptRow)
    get_signal = Query("get_signal", SignalRow)
    get_steps = Query("get_steps", StepRow)
    call_child = Query("call_child", CallChildRow)
    call_children = Query("call_children", ChildStateRow)
    parent_of = Query("parent_of", ParentRow)
    job_version = Query("job_version", VersionRow)
    get_run = Query("get_run", RunRow)
    list_runs = Query("list_runs", RunRow)
    lock_run = Query("lock_run", RunRow)
    descendant_runs = Query("descendant_runs", RunStateRow)
    run_jobs = Query("run_jobs", RunJobRow)
    runs_jobs = Query("runs_jobs", RunsJobRow)
    child_active = Query("child_active", NodeRow)
    run_child_active = Query("run_child_active", NodeRow)
    node_states = Query("node_states", NodeStateRow)
    spawned_of = Query("spawned_of", NodeStateRow)
    node_results = Query("node_results", NodeResultRow)
    children_of = Query("children_of", ChildRow)
    insert_children = Query("insert_children", NewChildRow)
    get_schedule_row = Query("get_schedule_row", StoredScheduleRow)
    list_schedule_rows = Query("list_schedule_rows", StoredScheduleRow)
    lock_schedule_row = Query("lock_schedule_row", StoredScheduleRow)
    binding_retentions = Query("binding_retentions", RetentionRow)
    binding_rules = Query("binding_rules", RulesRow)
    prune_pick = Query("prune_pick", PruneRow)
    prune_pick_others = Query("prune_pick_others", PruneRow)
    job_events = Query("job_events", EventRow)
    project_events = Query("project_events", ProjectedEventRow)
    fold_events = Query("fold_events", FoldedEventsRow)
    get_projector = Query("get_projector", ProjectorRow)
    lock_projector = Query("lock_projector", CursorRow)
    stats_rows_for = Query("stats_rows_for", StatsRow)
    stats_since = Query("stats_since", StatsRow)
    stats_hourly_rows_for = Query("stats_hourly_rows_for", StatsRow)
    stats_hourly_since = Query("stats_hourly_since", StatsRow)
    get_token = Query("get_token", TokenRow)
    list_tokens = Query("list_tokens", TokenRow)
    peek_by_priority = Query("peek_by_priority", CandidateRow)
    peek_by_age = Query("peek_by_age", CandidateRow)
    running_ids = Query("running_ids", JobIdRow)
    node_jobs = Query("node_jobs", NodeJobRow)
    active_in_range = Query("active_in_range", NodeJobRow)


QUERIES: dict[str, Query[Any]] = {q.name: q for q in vars(Q).values() if isinstance(q, Query)}
"""Every query handle by name."""
