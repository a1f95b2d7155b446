-- Named queries of retention: finished jobs past their binding's retention are deleted with their
-- history, a bounded batch per transaction. Every query named prune_history_* is run for each batch
-- with :ids (the jobs being deleted), so each concept that keeps rows per job removes its own.
-- The picked jobs are locked (SKIP LOCKED: workers pruning at once take different rows), so a
-- person's retry cannot slip in between the pick and the delete.

-- name: prune_pick
SELECT id FROM jobloom_jobs
WHERE finished_at IS NOT NULL AND finished_at < :cutoff AND state = :state AND binding = ANY(:bindings::text[])
ORDER BY finished_at LIMIT :limit
FOR UPDATE SKIP LOCKED

-- name: prune_pick_others
SELECT id FROM jobloom_jobs
WHERE finished_at IS NOT NULL AND finished_at < :cutoff AND state = :state
  AND binding <> ALL(:bindings::text[])
ORDER BY finished_at LIMIT :limit
FOR UPDATE SKIP LOCKED

-- name: prune_history_attempts
DELETE FROM jobloom_attempts WHERE job_id = ANY(:ids::bigint[])

-- name: prune_jobs
DELETE FROM jobloom_jobs WHERE id = ANY(:ids::bigint[])

-- name: prune_stats
DELETE FROM jobloom_stats
WHERE (binding, minute) IN (SELECT binding, minute FROM jobloom_stats WHERE minute < :minute LIMIT :limit)
