-- Named queries of the projector and the read model (jobloom_projector, jobloom_stats).
-- Projecting consumes events: the projector reads the oldest events by seq and deletes the ones it
-- folds in the same transaction, so every event still in the outbox is one not counted yet.
-- Transactions may commit out of seq order; an event committed late is simply found on a later pass
-- (nothing is skipped or counted twice, and no long transaction elsewhere on the server holds
-- projection back). The cursor row serializes projectors and records the last seq folded.

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
SELECT seq, at, binding, kind, duration FROM jobloom_events ORDER BY seq LIMIT :limit

-- name: count_unprojected
SELECT count(*) AS n FROM jobloom_events

-- name: prune_projected_events
DELETE FROM jobloom_events WHERE seq = ANY(:seqs::bigint[])

-- name: stats_rows_for
SELECT binding, minute, enqueued, started, succeeded, failed, retried, cancelled, stalled, runs, run_time,
       run_max, histogram
FROM jobloom_stats
WHERE minute BETWEEN :lo AND :hi AND binding = ANY(:bindings::text[])

-- name: upsert_stats
INSERT INTO jobloom_stats (binding, minute, enqueued, started, succeeded, failed, retried, cancelled, stalled,
                           runs, run_time, run_max, histogram)
VALUES (:binding, :minute, :enqueued, :started, :succeeded, :failed, :retried, :cancelled, :stalled,
        :runs, :run_time, :run_max, :histogram)
ON CONFLICT (binding, minute) DO UPDATE SET
    enqueued = excluded.enqueued, started = excluded.started, succeeded = excluded.succeeded,
    failed = excluded.failed, retried = excluded.retried, cancelled = excluded.cancelled,
    stalled = excluded.stalled, runs = excluded.runs, run_time = excluded.run_time, run_max = excluded.run_max,
    histogram = excluded.histogram

-- name: stats_since
SELECT binding, minute, enqueued, started, succeeded, failed, retried, cancelled, stalled, runs, run_time,
       run_max, histogram
FROM jobloom_stats
WHERE minute >= :minute AND (:binding::text IS NULL OR binding = :binding::text)
ORDER BY minute, binding

-- name: job_events
-- Not used by jobloom itself: tests and diagnostics read the events of one job still in the outbox.
SELECT seq, at, job_id, binding, kind, attempt, duration FROM jobloom_events WHERE job_id = :job_id ORDER BY seq
