-- The walk over a binding's keys in turn (round-robin fairness); the other queries of limits between keys
-- are in store/shared/sql/queries_keys.sql.

-- name: candidates_by_turn
-- returns: CandidateRow
-- Under round-robin fairness: the keys of the binding's queued jobs by name (code points: COLLATE "C",
-- as the index) from :low (after it with :strict), up to :keys of them, each found by one step along the
-- queued-by-key index; and each key's first :per_key jobs by priority, but none of the keys in
-- :full_keys (their jobs cannot start now). SKIP LOCKED as the other candidate reads.
WITH RECURSIVE turn(k, n) AS (
    SELECT (SELECT concurrency_key COLLATE "C" FROM jobloom_jobs
            WHERE binding = :binding AND state = 'queued' AND concurrency_key COLLATE "C" >= :low::text
              AND (:strict::int = 0 OR concurrency_key COLLATE "C" > :low::text)
            ORDER BY concurrency_key COLLATE "C" LIMIT 1), 1
    UNION ALL
    SELECT (SELECT concurrency_key COLLATE "C" FROM jobloom_jobs
            WHERE binding = :binding AND state = 'queued' AND concurrency_key COLLATE "C" > turn.k
            ORDER BY concurrency_key COLLATE "C" LIMIT 1), n + 1
    FROM turn WHERE turn.k IS NOT NULL AND n < :keys
)
SELECT j.id, j.priority, j.run_at, j.concurrency_key
FROM turn
CROSS JOIN LATERAL (
    SELECT q.id FROM jobloom_jobs q
    WHERE q.binding = :binding AND q.state = 'queued' AND q.concurrency_key COLLATE "C" = turn.k
    ORDER BY q.priority DESC, q.run_at, q.id LIMIT :per_key
) first
JOIN jobloom_jobs j ON j.id = first.id
WHERE turn.k IS NOT NULL AND turn.k <> ALL(:full_keys::text[]) AND j.state = 'queued'
FOR UPDATE OF j SKIP LOCKED

-- name: peek_by_turn
-- returns: CandidateRow
-- The candidates of candidates_by_turn (the same parameters), read without claiming them: why a job waits.
WITH RECURSIVE turn(k, n) AS (
    SELECT (SELECT concurrency_key COLLATE "C" FROM jobloom_jobs
            WHERE binding = :binding AND state = 'queued' AND concurrency_key COLLATE "C" >= :low::text
              AND (:strict::int = 0 OR concurrency_key COLLATE "C" > :low::text)
            ORDER BY concurrency_key COLLATE "C" LIMIT 1), 1
    UNION ALL
    SELECT (SELECT concurrency_key COLLATE "C" FROM jobloom_jobs
            WHERE binding = :binding AND state = 'queued' AND concurrency_key COLLATE "C" > turn.k
            ORDER BY concurrency_key COLLATE "C" LIMIT 1), n + 1
    FROM turn WHERE turn.k IS NOT NULL AND n < :keys
)
SELECT j.id, j.priority, j.run_at, j.concurrency_key
FROM turn
CROSS JOIN LATERAL (
    SELECT q.id FROM jobloom_jobs q
    WHERE q.binding = :binding AND q.state = 'queued' AND q.concurrency_key COLLATE "C" = turn.k
    ORDER BY q.priority DESC, q.run_at, q.id LIMIT :per_key
) first
JOIN jobloom_jobs j ON j.id = first.id
WHERE turn.k IS NOT NULL AND turn.k <> ALL(:full_keys::text[]) AND j.state = 'queued'
