-- Named queries of retention: finished jobs past their binding's retention are deleted with their
-- history, a bounded batch per transaction. Every query named prune_history_* is run for each batch
-- with :ids (the jobs being deleted), so each concept that keeps rows per job removes its own.
-- The newest job is never picked: SQLite gives a new row the highest id + 1, so deleting the newest
-- jobs would hand their ids out again, and an id must name one job for ever.

-- name: binding_retentions
-- The retention that the app performing each binding stored with it (JSON: state -> seconds).
SELECT binding, retention FROM jobloom_bindings WHERE retention IS NOT NULL ORDER BY binding

-- name: prune_pick
SELECT id, run_id FROM jobloom_jobs
WHERE finished_at IS NOT NULL AND finished_at < :cutoff AND state = :state
  AND binding IN (SELECT value FROM json_each(:bindings))
  AND id < (SELECT max(id) FROM jobloom_jobs)
ORDER BY finished_at LIMIT :limit

-- name: prune_pick_others
-- Jobs of the bindings not in :bindings (the pruning app's own) that have no stored retention: the
-- default retention applies. The stored retention is checked here, in the statement that picks, so
-- a binding whose retention is stored after the pruner listed them is never pruned by the default.
SELECT id, run_id FROM jobloom_jobs
WHERE finished_at IS NOT NULL AND finished_at < :cutoff AND state = :state
  AND binding NOT IN (SELECT value FROM json_each(:bindings))
  AND NOT EXISTS (SELECT 1 FROM jobloom_bindings b WHERE b.binding = jobloom_jobs.binding AND b.retention IS NOT NULL)
  AND id < (SELECT max(id) FROM jobloom_jobs)
ORDER BY finished_at LIMIT :limit

-- name: prune_history_attempts
DELETE FROM jobloom_attempts WHERE job_id IN (SELECT value FROM json_each(:ids))

-- name: prune_history_tags
DELETE FROM jobloom_job_tags WHERE job_id IN (SELECT value FROM json_each(:ids))

-- name: prune_jobs
DELETE FROM jobloom_jobs WHERE id IN (SELECT value FROM json_each(:ids))

-- name: lock_pruned_runs
-- (SQLite serializes writers: nothing to lock.)
SELECT id FROM jobloom_runs WHERE id IN (SELECT value FROM json_each(:ids))

-- name: prune_runs
-- A finished run goes with the last of its jobs.
DELETE FROM jobloom_runs
WHERE id IN (SELECT value FROM json_each(:ids)) AND state <> 'running'
  AND NOT EXISTS (SELECT 1 FROM jobloom_jobs j WHERE j.run_id = jobloom_runs.id)

-- name: prune_stats
DELETE FROM jobloom_stats
WHERE (binding, minute) IN (SELECT binding, minute FROM jobloom_stats WHERE minute < :minute LIMIT :limit)

-- name: prune_stats_hourly
DELETE FROM jobloom_stats_hourly
WHERE (binding, minute) IN (SELECT binding, minute FROM jobloom_stats_hourly WHERE minute < :minute LIMIT :limit)
