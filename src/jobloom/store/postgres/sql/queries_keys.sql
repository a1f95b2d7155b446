-- The walk over a binding's keys in turn (round-robin fairness); the other queries of limits between keys
-- are in store/shared/sql/queries_keys.sql.

-- fragment: turn_candidates
-- Under round-robin fairness: the keys of the binding's queued jobs by name (code points: COLLATE "C",
-- as the index) from :low (after it with :strict), up to :keys of them, each found by one step along the
-- queued-by-key index, but none of the keys in :full_keys (their jobs cannot start now); and each key's
-- first jobs by priority, none of :picked (chosen by an earlier round of this dispatch): its share of
-- :want starts among the keys found, times :weight (the largest weight), at most :per_key (all :per_key
-- with :want = 0). The share comes with each row (a key with that many rows may have more), and the
-- key's rate bucket (none: a full one).
-- A step lands on the key's first job by priority (the index orders a key's jobs so): a share of one
-- job is that job, unless :picked holds it, with no second descent of the index. The bucket is found by
-- its primary key: the key compared in the table's collation (COLLATE "default"); compared as "C" (the
-- walk's), no index of the buckets serves the join and each key read scans every bucket of the binding.
WITH RECURSIVE turn(k, id, n) AS (
    (SELECT concurrency_key COLLATE "C", id, 1 FROM jobloom_jobs
     WHERE binding = :binding AND state = 'queued' AND concurrency_key COLLATE "C" >= :low::text
       AND (:strict::int = 0 OR concurrency_key COLLATE "C" > :low::text)
     ORDER BY concurrency_key COLLATE "C", priority DESC, run_at, id LIMIT 1)
    UNION ALL
    SELECT step.k, step.id, turn.n + 1 FROM turn CROSS JOIN LATERAL (
        SELECT concurrency_key COLLATE "C" AS k, id FROM jobloom_jobs
        WHERE binding = :binding AND state = 'queued' AND concurrency_key COLLATE "C" > turn.k
        ORDER BY concurrency_key COLLATE "C", priority DESC, run_at, id LIMIT 1
    ) step
    WHERE turn.n < :keys
),
walked AS (SELECT turn.k, turn.id FROM turn WHERE turn.k <> ALL(:full_keys::text[])),
share AS (
    SELECT CASE WHEN :want::int = 0 THEN :per_key::int
                ELSE LEAST(:per_key::int, (:want::int + count(*) - 1) / GREATEST(count(*), 1) * :weight::int) END AS p
    FROM walked
)
SELECT j.id, j.priority, j.run_at, j.concurrency_key, share.p AS share, b.tokens, b.tokens_at
FROM walked
CROSS JOIN share
LEFT JOIN jobloom_key_buckets b ON b.binding = :binding AND b.concurrency_key = walked.k COLLATE "default"
CROSS JOIN LATERAL (
    SELECT walked.id WHERE share.p = 1 AND walked.id <> ALL(:picked::bigint[])
    UNION ALL
    (SELECT q.id FROM jobloom_jobs q
     WHERE (share.p > 1 OR walked.id = ANY(:picked::bigint[]))
       AND q.binding = :binding AND q.state = 'queued' AND q.concurrency_key COLLATE "C" = walked.k
       AND q.id <> ALL(:picked::bigint[])
     ORDER BY q.priority DESC, q.run_at, q.id LIMIT share.p)
) first
JOIN jobloom_jobs j ON j.id = first.id
WHERE j.state = 'queued'

-- name: candidates_by_turn
-- returns: TurnCandidateRow
-- turn_candidates, the jobs claimed as they are read (SKIP LOCKED, as the other candidate reads).
{turn_candidates}
FOR UPDATE OF j SKIP LOCKED

-- name: peek_by_turn
-- returns: TurnCandidateRow
-- The candidates of turn_candidates (the same parameters), read without claiming them: why a job waits.
{turn_candidates}
