-- Named queries of retention: finished jobs past their binding's retention are deleted with their
-- history, a bounded batch per transaction. Every query named prune_history_* is run for each batch
-- with :ids (the jobs being deleted), so each concept that keeps rows per job removes its own.
-- The newest job is never picked: SQLite gives a new row the highest id + 1, so deleting the newest
-- jobs would hand their ids out again, and an id must name one job for ever.

-- name: prune_runs
-- A finished run goes with the last of its jobs.
DELETE FROM jobloom_runs
WHERE id IN (SELECT value FROM json_each(:ids)) AND state <> 'running'
  AND NOT EXISTS (SELECT 1 FROM jobloom_jobs j WHERE j.run_id = jobloom_runs.id)
