-- Named queries of the projector and the read model (jobloom_projector, jobloom_stats). Writers are
-- serialized by the store's write lock, so the outbox's seq order is its commit order. Each fold
-- deletes the events it counted in its own transaction, so every event in the outbox is one not
-- counted yet: the projector reads the oldest, whatever its cursor says (seqs are rowids, which
-- restart once the outbox is empty; migration 0006).

-- name: fold_events
-- returns: FoldedEventsRow
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

