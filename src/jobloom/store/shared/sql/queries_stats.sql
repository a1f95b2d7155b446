-- Named queries of the projector and the read model (jobloom_projector, jobloom_stats). Each fold
-- deletes the events it counted in its own transaction, so every event in the outbox is one not
-- counted yet (each store's queries_stats.sql says how it orders and folds them).

-- row: FoldedEventsRow
-- Outbox events counted together: one binding, minute, kind and run-time bucket (``None``: no run time),
-- from ``rows`` outbox rows.
--   binding: str, minute: int, kind: str, bucket: int | None, n: int, total: float | None, top: float | None
--   last_seq: int, rows: int

-- name: init_projector
INSERT INTO jobloom_projector (name, last_seq, updated_at) VALUES (:name, 0, :now)
ON CONFLICT (name) DO NOTHING

-- row: CursorRow
-- The projector's cursor, locked.
--   last_seq: int

-- name: lock_projector
-- returns: CursorRow
-- SKIP LOCKED: while another worker projects, this one finds no row and does nothing.
SELECT last_seq FROM jobloom_projector WHERE name = :name FOR UPDATE SKIP LOCKED

-- row: ProjectorRow
-- The projector's cursor.
--   last_seq: int, updated_at: float

-- name: get_projector
-- returns: ProjectorRow
SELECT last_seq, updated_at FROM jobloom_projector WHERE name = :name

-- name: save_projector
UPDATE jobloom_projector SET last_seq = :last_seq, updated_at = :now WHERE name = :name

-- row: ProjectedEventRow
-- An outbox row as the projector folds it: ``n`` events (one, or several counted together, whose run
-- times add up to ``duration``, the longest ``top``, all in histogram bucket ``bucket``).
--   seq: int, at: float, binding: str, kind: str, duration: float | None, n: int = 1
--   top: float | None = None, bucket: int | None = None

-- name: project_events
-- returns: ProjectedEventRow
-- Not used by the projector (it reads fold_events): tests and diagnostics read the outbox's oldest events.
SELECT seq, at, binding, kind, duration, n, top, bucket FROM jobloom_events ORDER BY seq LIMIT :limit

-- name: count_unprojected
-- returns: CountRow
-- Events, not rows: a row may count several.
SELECT coalesce(sum(n), 0) AS n FROM jobloom_events

-- name: prune_projected_events
-- Not used by the projector (see fold_events and prune_folded_events): deletes the outbox's events by seq.
DELETE FROM jobloom_events WHERE seq = ANY(:seqs::bigint[])

-- row: StatsRow
-- One binding's minute of the read model (``jobloom_stats``).
--   binding: str, minute: int, enqueued: int, started: int, succeeded: int, failed: int, retried: int
--   cancelled: int, stalled: int, expired: int, runs: int, run_time: float, run_max: float | None
--   histogram: str

-- name: stats_rows_for
-- returns: StatsRow
SELECT binding, minute, enqueued, started, succeeded, failed, retried, cancelled, stalled, expired, runs, run_time,
       run_max, histogram
FROM jobloom_stats
WHERE minute BETWEEN :lo AND :hi AND binding = ANY(:bindings::text[])

-- name: upsert_stats
INSERT INTO jobloom_stats (binding, minute, enqueued, started, succeeded, failed, retried, cancelled, stalled, expired,
                           runs, run_time, run_max, histogram)
VALUES (:binding, :minute, :enqueued, :started, :succeeded, :failed, :retried, :cancelled, :stalled, :expired,
        :runs, :run_time, :run_max, :histogram)
ON CONFLICT (binding, minute) DO UPDATE SET
    enqueued = excluded.enqueued, started = excluded.started, succeeded = excluded.succeeded,
    failed = excluded.failed, retried = excluded.retried, cancelled = excluded.cancelled,
    stalled = excluded.stalled, expired = excluded.expired, runs = excluded.runs, run_time = excluded.run_time, run_max = excluded.run_max,
    histogram = excluded.histogram

-- name: stats_since
-- returns: StatsRow
SELECT binding, minute, enqueued, started, succeeded, failed, retried, cancelled, stalled, expired, runs, run_time,
       run_max, histogram
FROM jobloom_stats
WHERE minute >= :minute AND (:binding::text IS NULL OR binding = :binding::text)
ORDER BY minute, binding

-- The same, per hour (jobloom_stats_hourly: minute is the hour's first minute).

-- name: stats_hourly_rows_for
-- returns: StatsRow
SELECT binding, minute, enqueued, started, succeeded, failed, retried, cancelled, stalled, expired, runs, run_time,
       run_max, histogram
FROM jobloom_stats_hourly
WHERE minute BETWEEN :lo AND :hi AND binding = ANY(:bindings::text[])

-- name: upsert_stats_hourly
INSERT INTO jobloom_stats_hourly (binding, minute, enqueued, started, succeeded, failed, retried, cancelled, stalled, expired,
                                  runs, run_time, run_max, histogram)
VALUES (:binding, :minute, :enqueued, :started, :succeeded, :failed, :retried, :cancelled, :stalled, :expired,
        :runs, :run_time, :run_max, :histogram)
ON CONFLICT (binding, minute) DO UPDATE SET
    enqueued = excluded.enqueued, started = excluded.started, succeeded = excluded.succeeded,
    failed = excluded.failed, retried = excluded.retried, cancelled = excluded.cancelled,
    stalled = excluded.stalled, expired = excluded.expired, runs = excluded.runs, run_time = excluded.run_time, run_max = excluded.run_max,
    histogram = excluded.histogram

-- name: stats_hourly_since
-- returns: StatsRow
SELECT binding, minute, enqueued, started, succeeded, failed, retried, cancelled, stalled, expired, runs, run_time,
       run_max, histogram
FROM jobloom_stats_hourly
WHERE minute >= :minute AND minute < :until AND (:binding::text IS NULL OR binding = :binding::text)
ORDER BY minute, binding

-- row: EventRow
-- An outbox row (``jobloom_events``) of one job's event (a row counting several names no job).
--   seq: int, at: float, job_id: int | None, binding: str, kind: str, attempt: int, duration: float | None

-- name: job_events
-- returns: EventRow
-- Not used by jobloom itself: tests and diagnostics read the events of one job still in the outbox.
SELECT seq, at, job_id, binding, kind, attempt, duration FROM jobloom_events WHERE job_id = :job_id ORDER BY seq

