-- Named queries of the projector and the read model (jobloom_projector, jobloom_stats).
-- Projecting consumes events: the projector reads the oldest events by seq and deletes the ones it
-- folds in the same transaction, so every event still in the outbox is one not counted yet.
-- Transactions may commit out of seq order; an event committed late is simply found on a later pass
-- (nothing is skipped or counted twice, and no long transaction elsewhere on the server holds
-- projection back). The cursor row serializes projectors and records the last seq folded.

-- name: fold_events
-- returns: FoldedEventsRow
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

