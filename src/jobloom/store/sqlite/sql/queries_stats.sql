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

-- name: fold_events
-- The oldest :limit outbox rows, their events counted per binding, minute, kind and run-time bucket:
-- a row of one event has its bucket computed here, the histogram's bucket_of in SQL (0 up to 10 µs,
-- then ceil(ln(d / 10 µs) / ln(1.1)), at least 1), NULL for an event without a run time; a row that
-- counts several events (n > 1) brings its bucket, the sum of their run times and the longest.
-- prune_folded_events then deletes them: with one writer at a time, the oldest :limit rows are
-- exactly those up to the last seq folded.
SELECT binding, CAST(floor(at / 60.0) AS INTEGER) AS minute, kind,
       CASE WHEN bucket IS NOT NULL THEN bucket
            WHEN kind IN ('succeeded', 'failed', 'retried') AND duration >= 0 THEN
            CASE WHEN duration <= 0.00001 THEN 0
                 ELSE max(1, CAST(ceil(ln(duration / 0.00001) / ln(1.1) - 0.000000001) AS INTEGER)) END
       END AS bucket,
       sum(n) AS n, sum(duration) AS total, max(coalesce(top, duration)) AS top, max(seq) AS last_seq,
       count(*) AS rows
FROM (SELECT seq, at, binding, kind, duration, n, top, bucket FROM jobloom_events ORDER BY seq LIMIT :limit)
GROUP BY 1, 2, 3, 4

-- name: prune_folded_events
DELETE FROM jobloom_events WHERE seq <= :last_seq

-- name: project_events
-- Not used by the projector (it reads fold_events): tests and diagnostics read the outbox's oldest events.
SELECT seq, at, binding, kind, duration, n, top, bucket FROM jobloom_events ORDER BY seq LIMIT :limit

-- name: count_unprojected
-- Events, not rows: a row may count several.
SELECT coalesce(sum(n), 0) AS n FROM jobloom_events

-- name: prune_projected_events
-- Not used by the projector (see prune_folded_events): deletes the outbox's events by seq.
DELETE FROM jobloom_events WHERE seq IN (SELECT value FROM json_each(:seqs))

-- name: stats_rows_for
SELECT binding, minute, enqueued, started, succeeded, failed, retried, cancelled, stalled, expired, runs, run_time,
       run_max, histogram
FROM jobloom_stats
WHERE minute BETWEEN :lo AND :hi AND binding IN (SELECT value FROM json_each(:bindings))

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
WHERE minute >= :minute AND (:binding IS NULL OR binding = :binding)
ORDER BY minute, binding

-- The same, per hour (jobloom_stats_hourly: minute is the hour's first minute).
-- name: stats_hourly_rows_for
SELECT binding, minute, enqueued, started, succeeded, failed, retried, cancelled, stalled, expired, runs, run_time,
       run_max, histogram
FROM jobloom_stats_hourly
WHERE minute BETWEEN :lo AND :hi AND binding IN (SELECT value FROM json_each(:bindings))

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
WHERE minute >= :minute AND minute < :until AND (:binding IS NULL OR binding = :binding)
ORDER BY minute, binding

-- name: job_events
-- Not used by jobloom itself: tests and diagnostics read the events of one job still in the outbox.
SELECT seq, at, job_id, binding, kind, attempt, duration FROM jobloom_events WHERE job_id = :job_id ORDER BY seq
