-- Dependencies between jobs (jobloom.engine.dependencies).

-- row: DependencyRow
-- A job that a new job depends on, locked and marked as having dependants.
--   id: int, state: str, run_id: str | None

-- name: insert_dependency
INSERT INTO jobloom_dependencies (depends_on, job_id, done) VALUES (:depends_on, :job_id, :done)

-- name: insert_dependency_wait
INSERT INTO jobloom_dependency_waits (job_id, pending, on_failure, batch_id)
VALUES (:job_id, :pending, :on_failure, :batch_id)

-- row: CountdownRow
-- A waiting job's count of dependencies still open, after a count down.
--   job_id: int, pending: int, on_failure: str, batch_id: int | None

-- name: count_down_dependencies
-- returns: CountdownRow
-- The countdown's row lock orders the transactions that end a job's dependencies: each sees the
-- count the one before it left.
UPDATE jobloom_dependency_waits SET pending = pending - :n WHERE job_id = :job_id
RETURNING job_id, pending, on_failure, batch_id

-- row: MovedRow
-- A job a statement moved to another state: what its event needs.
--   id: int, binding: str, attempt: int

-- name: release_dependant
-- returns: MovedRow
-- Every dependency of a waiting job ended: it is runnable from now.
UPDATE jobloom_jobs SET state = 'queued', run_at = :now
WHERE id = :id AND state = 'waiting'
RETURNING id, binding, attempt

-- row: SkippedRow
-- A waiting job skipped because a dependency did not succeed: what its event and its own
-- dependants need.
--   id: int, binding: str, attempt: int, dependants: bool

-- name: skip_dependant
-- returns: SkippedRow
-- A dependency of a waiting job did not succeed: the job is skipped.
UPDATE jobloom_jobs SET state = 'skipped', finished_at = :now, error = :reason
WHERE id = :id AND state = 'waiting'
RETURNING id, binding, attempt, dependants

-- row: LinkRow
-- A job linked to another (a dependency or a dependant) and its state (None: deleted since).
--   id: int, state: str | None

-- name: dependencies_of
-- returns: LinkRow
-- A job's dependencies with their states (NULL: deleted since).
SELECT d.depends_on AS id, j.state FROM jobloom_dependencies d LEFT JOIN jobloom_jobs j ON j.id = d.depends_on
WHERE d.job_id = :id ORDER BY d.depends_on

-- name: dependants_of
-- returns: LinkRow
-- The first of a job's dependants with their states (NULL: deleted since).
SELECT d.job_id AS id, j.state FROM jobloom_dependencies d LEFT JOIN jobloom_jobs j ON j.id = d.job_id
WHERE d.depends_on = :id ORDER BY d.job_id LIMIT :limit

-- row: EdgeRow
-- An edge closed because its dependency ended: ``job_id`` depends on ``depends_on``.
--   job_id: int, depends_on: int

-- name: close_dependencies
-- returns: EdgeRow
-- The edges from jobs that just finished, each closed once: a dependency retried by hand and ended
-- again is not counted again.
UPDATE jobloom_dependencies SET done = true
WHERE depends_on = ANY(:ids::bigint[]) AND {sqlite: done = 0}{postgres: NOT done}
RETURNING job_id, depends_on
