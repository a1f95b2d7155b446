-- The walk over a binding's keys in turn (round-robin fairness); the other queries of limits between keys
-- are in store/shared/sql/queries_keys.sql.

-- name: candidates_by_turn
-- returns: CandidateRow
-- Under round-robin fairness: the keys of the binding's queued jobs by name from :low (after it with
-- :strict), up to :keys of them, each found by one step along the queued-by-key index; and each key's
-- first :per_key jobs by priority, but none of the keys in :full_keys (their jobs cannot start now).
WITH RECURSIVE turn(k, n) AS (
    SELECT (SELECT concurrency_key FROM jobloom_jobs INDEXED BY jobloom_jobs_queued_key
            WHERE binding = :binding AND state = 'queued' AND concurrency_key >= :low
              AND (:strict = 0 OR concurrency_key > :low)
            ORDER BY concurrency_key LIMIT 1), 1
    UNION ALL
    SELECT (SELECT concurrency_key FROM jobloom_jobs INDEXED BY jobloom_jobs_queued_key
            WHERE binding = :binding AND state = 'queued' AND concurrency_key > turn.k
            ORDER BY concurrency_key LIMIT 1), n + 1
    FROM turn WHERE turn.k IS NOT NULL AND n < :keys
)
SELECT j.id, j.priority, j.run_at, j.concurrency_key
FROM turn, jobloom_jobs j
WHERE turn.k IS NOT NULL AND turn.k NOT IN (SELECT value FROM json_each(:full_keys))
  AND j.id IN (SELECT id FROM jobloom_jobs INDEXED BY jobloom_jobs_queued_key
               WHERE binding = :binding AND state = 'queued' AND concurrency_key = turn.k
               ORDER BY priority DESC, run_at, id LIMIT :per_key)

-- name: peek_by_turn
-- returns: CandidateRow
-- The candidates of candidates_by_turn (the same parameters), read without claiming them: why a job waits.
WITH RECURSIVE turn(k, n) AS (
    SELECT (SELECT concurrency_key FROM jobloom_jobs INDEXED BY jobloom_jobs_queued_key
            WHERE binding = :binding AND state = 'queued' AND concurrency_key >= :low
              AND (:strict = 0 OR concurrency_key > :low)
            ORDER BY concurrency_key LIMIT 1), 1
    UNION ALL
    SELECT (SELECT concurrency_key FROM jobloom_jobs INDEXED BY jobloom_jobs_queued_key
            WHERE binding = :binding AND state = 'queued' AND concurrency_key > turn.k
            ORDER BY concurrency_key LIMIT 1), n + 1
    FROM turn WHERE turn.k IS NOT NULL AND n < :keys
)
SELECT j.id, j.priority, j.run_at, j.concurrency_key
FROM turn, jobloom_jobs j
WHERE turn.k IS NOT NULL AND turn.k NOT IN (SELECT value FROM json_each(:full_keys))
  AND j.id IN (SELECT id FROM jobloom_jobs INDEXED BY jobloom_jobs_queued_key
               WHERE binding = :binding AND state = 'queued' AND concurrency_key = turn.k
               ORDER BY priority DESC, run_at, id LIMIT :per_key)
