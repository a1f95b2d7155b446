-- Named queries of the projector and the read model (jobloom_projector, jobloom_stats). Each fold
-- deletes the events it counted in its own transaction, so every event in the outbox is one not
-- counted yet (each store's queries_stats.sql says how it orders and folds them).

-- name: init_projector
INSERT INTO jobloom_projector (name, last_seq, updated_at) VALUES (:name, 0, :now)
ON CONFLICT (name) DO NOTHING

-- name: lock_projector
-- SKIP LOCKED: while another worker projects, this one finds no row and does nothing.
SELECT last_seq FROM jobloom_projector WHERE name = :name FOR UPDATE SKIP LOCKED

-- name: get_projector
SELECT last_seq, updated_at FROM jobloom_projector WHERE name = :name

-- name: save_projector
UPDATE jobloom_projector SET last_seq = :last_seq, updated_at = :now WHERE name = :name

-- name: project_events
-- Not used by the projector (it reads fold_events): tests and diagnostics read the outbox's oldest events.
SELECT seq, at, binding, kind, duration, n, top, bucket FROM jobloom_events ORDER BY seq LIMIT :limit

-- name: count_unprojected
-- Events, not rows: a row may count several.
SELECT coalesce(sum(n), 0) AS n FROM jobloom_events

-- name: prune_projected_events
-- Not used by the projector (see fold_events and prune_folded_events): deletes the outbox's events by seq.
DELETE FROM jobloom_events WHERE seq = ANY(:seqs::bigint[])

-- name: stats_rows_for
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
SELECT binding, minute, enqueued, started, succeeded, failed, retried, cancelled, stalled, expired, runs, run_time,
       run_max, histogram
FROM jobloom_stats
WHERE minute >= :minute AND (:binding::text IS NULL OR binding = :binding::text)
ORDER BY minute, binding

-- The same, per hour (jobloom_stats_hourly: minute is the hour's first minute).

-- name: stats_hourly_rows_for
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
SELECT binding, minute, enqueued, started, succeeded, failed, retried, cancelled, stalled, expired, runs, run_time,
       run_max, histogram
FROM jobloom_stats_hourly
WHERE minute >= :minute AND minute < :until AND (:binding::text IS NULL OR binding = :binding::text)
ORDER BY minute, binding

-- name: job_events
-- Not used by jobloom itself: tests and diagnostics read the events of one job still in the outbox.
SELECT seq, at, job_id, binding, kind, attempt, duration FROM jobloom_events WHERE job_id = :job_id ORDER BY seq

