-- Dependencies between jobs (jobloom.engine.dependencies).

-- name: lock_dependencies
-- returns: DependencyRow
-- The jobs a new job depends on, locked in id order and marked as having dependants (so that their
-- ending is counted): a dependency that ends meanwhile either commits first (its state is read
-- here) or waits for this insert and then sees the mark.
WITH locked AS (
    SELECT id FROM jobloom_jobs WHERE id = ANY(:ids::bigint[]) ORDER BY id FOR UPDATE
)
UPDATE jobloom_jobs j SET dependants = true FROM locked WHERE j.id = locked.id
RETURNING j.id, j.state, j.run_id
