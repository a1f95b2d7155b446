-- The walk over a binding's keys in turn (round-robin fairness); the other queries of limits between keys
-- are in store/shared/sql/queries_keys.sql.

-- fragment: turn_candidates
-- Under round-robin fairness: the keys of the binding's queued jobs by name from :low (after it with
-- :strict), up to :keys of them, each found by one step along the queued-by-key index, but none of the
-- keys in :full_keys (their jobs cannot start now); and each key's first jobs by priority, none of
-- :picked (chosen by an earlier round of this dispatch): its share of :want starts among the keys found,
-- times :weight (the largest weight), at most :per_key (all :per_key with :want = 0). The share comes
-- with each row: a key with that many rows may have more; and the key's rate bucket (none: a full one).
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
),
walked(k) AS (SELECT k FROM turn WHERE k IS NOT NULL AND k NOT IN (SELECT value FROM json_each(:full_keys))),
share(p) AS (
    SELECT CASE WHEN :want = 0 THEN :per_key
                ELSE min(:per_key, (:want + count(*) - 1) / max(count(*), 1) * :weight) END
    FROM walked
)
SELECT j.id, j.priority, j.run_at, j.concurrency_key, share.p AS share, b.tokens, b.tokens_at
FROM walked CROSS JOIN share CROSS JOIN jobloom_jobs j
LEFT JOIN jobloom_key_buckets b ON b.binding = :binding AND b.concurrency_key = walked.k
WHERE j.id IN (SELECT id FROM jobloom_jobs INDEXED BY jobloom_jobs_queued_key
               WHERE binding = :binding AND state = 'queued' AND concurrency_key = walked.k
                 AND id NOT IN (SELECT value FROM json_each(:picked))
               ORDER BY priority DESC, run_at, id LIMIT (SELECT p FROM share))

-- name: candidates_by_turn
-- returns: TurnCandidateRow
-- turn_candidates, for dispatch (its write transaction holds the file: there is no row to lock).
{turn_candidates}

-- name: peek_by_turn
-- returns: TurnCandidateRow
-- The candidates of turn_candidates (the same parameters), read without claiming them: why a job waits.
{turn_candidates}
