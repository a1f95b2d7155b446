-- Named queries of retention: finished jobs past their binding's retention are deleted with their
-- history, a bounded batch per transaction. Every query named prune_history_* is run for each batch
-- with :ids (the jobs being deleted), so each concept that keeps rows per job removes its own.
-- The picked jobs are locked (SKIP LOCKED: workers pruning at once take different rows), so a
-- person's retry cannot slip in between the pick and the delete.

-- name: prune_runs
-- A finished run goes with the last of its jobs.
DELETE FROM jobloom_runs r
WHERE r.id = ANY(:ids::text[]) AND r.state <> 'running'
  AND NOT EXISTS (SELECT 1 FROM jobloom_jobs j WHERE j.run_id = r.id)
