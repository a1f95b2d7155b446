-- Dependencies between jobs (jobloom.engine.dependencies).

-- name: insert_dependency
INSERT INTO jobloom_dependencies (depends_on, job_id, done) VALUES (:depends_on, :job_id, :done)

-- name: insert_dependency_wait
INSERT INTO jobloom_dependency_waits (job_id, pending, on_failure, batch_id)
VALUES (:job_id, :pending, :on_failure, :batch_id)

-- name: count_down_dependencies
-- The countdown's row lock orders the transactions that end a job's dependencies: each sees the
-- count the one before it left.
UPDATE jobloom_dependency_waits SET pending = pending - :n WHERE job_id = :job_id
RETURNING job_id, pending, on_failure, batch_id

-- name: release_dependant
-- Every dependency of a waiting job ended: it is runnable from now.
UPDATE jobloom_jobs SET state = 'queued', run_at = :now
WHERE id = :id AND state = 'waiting'
RETURNING id, binding, attempt

-- name: skip_dependant
-- A dependency of a waiting job did not succeed: the job is skipped.
UPDATE jobloom_jobs SET state = 'skipped', finished_at = :now, error = :reason
WHERE id = :id AND state = 'waiting'
RETURNING id, binding, attempt, dependants

-- name: dependencies_of
-- A job's dependencies with their states (NULL: deleted since).
SELECT d.depends_on AS id, j.state FROM jobloom_dependencies d LEFT JOIN jobloom_jobs j ON j.id = d.depends_on
WHERE d.job_id = :id ORDER BY d.depends_on

-- name: dependants_of
-- The first of a job's dependants with their states (NULL: deleted since).
SELECT d.job_id AS id, j.state FROM jobloom_dependencies d LEFT JOIN jobloom_jobs j ON j.id = d.job_id
WHERE d.depends_on = :id ORDER BY d.job_id LIMIT :limit

-- name: close_dependencies
-- The edges from jobs that just finished, each closed once: a dependency retried by hand and ended
-- again is not counted again.
UPDATE jobloom_dependencies SET done = true
WHERE depends_on = ANY(:ids::bigint[]) AND {sqlite: done = 0}{postgres: NOT done}
RETURNING job_id, depends_on
