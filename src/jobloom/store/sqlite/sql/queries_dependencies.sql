-- Dependencies between jobs (jobloom.engine.dependencies).

-- name: lock_dependencies
-- returns: DependencyRow
-- The jobs a new job depends on, marked as having dependants (so that their ending is counted).
UPDATE jobloom_jobs SET dependants = 1 WHERE id IN (SELECT value FROM json_each(:ids))
RETURNING id, state, run_id
