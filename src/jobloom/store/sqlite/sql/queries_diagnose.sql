-- Named queries of the diagnosis of a job that is not running (app/diagnose.py). Each reads an index
-- of active jobs only, so that its cost does not grow with the history.

-- name: active_in_range
-- returns: NodeJobRow
-- Active jobs of a run whose node lies between :lo and :hi (a fan-out's children, or what a node
-- spawned), from the index of active run jobs.
SELECT id, node, state FROM jobloom_jobs
WHERE run_id = :run_id AND (state = 'waiting' OR state = 'scheduled' OR state = 'queued' OR state = 'running')
  AND node > :lo AND node < :hi
ORDER BY node LIMIT :limit
