-- Named queries of the projector and the read model (jobloom_projector, jobloom_stats). Writers are
-- serialized by the store's write lock, so the outbox's seq order is its commit order. Each fold
-- deletes the events it counted in its own transaction, so every event in the outbox is one not
-- counted yet: the projector reads the oldest, whatever its cursor says (seqs are rowids, which
-- restart once the outbox is empty; migration 0006).

-- name: init_projector
INSERT INTO jobloom_projector (name, last_seq, updated_at) VALUES (:name, 0, :now)
ON CONFLICT (name) DO NOTHING

-- name: lock_projector
SELECT last_seq FROM jobloom_projector WHERE name = :name

-- name: get_projector
SELECT last_seq, updated_at FROM jobloom_projector WHERE name = :name

-- name: save_projector
UPDATE jobloom_projector SET last_seq = :last_seq, updated_at = :now WHERE name = :name

-- name: project_events
SELECT seq, at, binding, kind, duration FROM jobloom_events ORDER BY seq LIMIT :limit

-- name: count_unprojected
SELECT count(*) AS n FROM jobloom_events

-- name: prune_projected_events
DELETE FROM jobloom_events WHERE seq IN (SELECT value FROM json_each(:seqs))

-- name: stats_rows_for
SELECT binding, minute, enqueued, started, succeeded, failed, retried, cancelled, stalled, runs, run_time,
       run_max, histogram
FROM jobloom_stats
WHERE minute BETWEEN :lo AND :hi AND binding IN (SELECT value FROM json_each(:bindings))

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
WHERE minute >= :minute AND (:binding IS NULL OR binding = :binding)
ORDER BY minute, binding

-- name: job_events
-- Not used by jobloom itself: tests and diagnostics read the events of one job still in the outbox.
SELECT seq, at, job_id, binding, kind, attempt, duration FROM jobloom_events WHERE job_id = :job_id ORDER BY seq
