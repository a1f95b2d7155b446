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

-- name: fold_events
-- Deletes the oldest :limit outbox rows and returns their events counted per binding, minute, kind and
-- run-time bucket: a row of one event has its bucket computed here, the histogram's bucket_of in SQL
-- (0 up to 10 µs, then ceil(ln(d / 10 µs) / ln(1.1)), at least 1), NULL for an event without a run
-- time; a row that counts several events (n > 1) brings its bucket, the sum of their run times and
-- the longest. One statement reads and deletes: a range of seqs could also hold an event whose
-- transaction committed after the read (seq order is not commit order here), and it would be
-- deleted without being counted.
WITH folded AS (
    DELETE FROM jobloom_events
    WHERE seq = ANY (ARRAY(SELECT seq FROM jobloom_events ORDER BY seq LIMIT :limit))  -- by the index, not a hash join
    RETURNING seq, at, binding, kind, duration, n, top, bucket
)
SELECT binding, floor(at / 60::float8)::bigint AS minute, kind,
       CASE WHEN bucket IS NOT NULL THEN bucket
            WHEN kind IN ('succeeded', 'failed', 'retried') AND duration >= 0 THEN
            CASE WHEN duration <= 0.00001::float8 THEN 0
                 ELSE greatest(1, ceil(ln(duration / 0.00001::float8) / ln(1.1::float8) - 0.000000001::float8))::integer
            END
       END AS bucket,
       sum(n) AS n, sum(duration) AS total, max(coalesce(top, duration)) AS top, max(seq) AS last_seq,
       count(*) AS rows
FROM folded
GROUP BY 1, 2, 3, 4

-- name: prune_folded_events
-- Nothing is left to delete here: fold_events deleted what it folded (SQLite deletes by range here).
SELECT 1 WHERE :last_seq::bigint IS NULL

-- name: project_events
-- Not used by the projector (it reads fold_events): tests and diagnostics read the outbox's oldest events.
SELECT seq, at, binding, kind, duration, n, top, bucket FROM jobloom_events ORDER BY seq LIMIT :limit

-- name: count_unprojected
-- Events, not rows: a row may count several.
SELECT coalesce(sum(n), 0) AS n FROM jobloom_events

-- name: prune_projected_events
-- Not used by the projector (see fold_events): deletes the outbox's events by seq.
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
