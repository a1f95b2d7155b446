-- Jobs that call other jobs (jobloom.engine.calls) and the version that first ran a job.

-- name: set_parent
-- The job a call made is its caller's child: the caller is woken when it ends.
UPDATE jobloom_jobs SET parent_id = :parent_id WHERE id = :id

-- name: call_child
SELECT id, binding, state, result, error FROM jobloom_jobs WHERE id = :id

-- name: call_children
-- The children a suspending caller waits for, locked after the caller (a child's id is larger than its
-- caller's: the lock order holds): a child ending meanwhile is waited for, so its end is seen here, or its
-- wake-up finds the caller suspended. SQLite serializes writers: nothing to lock.
SELECT id, state FROM jobloom_jobs WHERE id = ANY(:ids::bigint[]) ORDER BY id {postgres: FOR SHARE}

-- name: parent_of
SELECT parent_id FROM jobloom_jobs WHERE id = :id AND parent_id IS NOT NULL

-- name: job_version
SELECT version FROM jobloom_jobs WHERE id = :id

-- name: set_version
-- The first version recorded for a job stays: it is the version that first ran it.
UPDATE jobloom_jobs SET version = :version WHERE id = :id AND version IS NULL
