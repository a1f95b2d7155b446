-- Named queries of the diagnosis of a job that is not running (app/diagnose.py, PostgreSQL). Each
-- reads an index of active jobs only, so that its cost does not grow with the history; none locks.

-- name: active_in_range
-- returns: NodeJobRow
-- Active jobs of a run whose node lies between :lo and :hi (a fan-out's children, or what a node
-- spawned), from the index of active run jobs (node names compared byte by byte).
SELECT id, node, state FROM jobloom_jobs
WHERE run_id = :run_id AND state IN ('waiting', 'scheduled', 'queued', 'running')
  AND node COLLATE "C" > :lo::text COLLATE "C" AND node COLLATE "C" < :hi::text COLLATE "C"
ORDER BY node COLLATE "C" LIMIT :limit
