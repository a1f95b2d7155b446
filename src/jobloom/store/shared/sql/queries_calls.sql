-- Jobs that call other jobs (jobloom.engine.calls) and the version that first ran a job.

-- name: set_parent
-- The job a call made is its caller's child: the caller is woken when it ends.
UPDATE jobloom_jobs SET parent_id = :parent_id WHERE id = :id

-- row: CallChildRow
-- The job a ``self.call`` made, as its caller reads it.
--   id: int, binding: str, state: str, result: str | None, error: str | None

-- name: call_child
-- returns: CallChildRow
SELECT id, binding, state, result, error FROM jobloom_jobs WHERE id = :id

-- row: ChildStateRow
-- A called child's state, as its suspending caller's report reads it.
--   id: int, state: str

-- name: call_children
-- returns: ChildStateRow
-- The children a suspending caller waits for, locked after the caller (a child's id is larger than its
-- caller's: the lock order holds): a child ending meanwhile is waited for, so its end is seen here, or its
-- wake-up finds the caller suspended. SQLite serializes writers: nothing to lock.
SELECT id, state FROM jobloom_jobs WHERE id = ANY(:ids::bigint[]) ORDER BY id {postgres: FOR SHARE}

-- row: ParentRow
-- The caller of a job made by ``self.call``.
--   parent_id: int

-- name: parent_of
-- returns: ParentRow
SELECT parent_id FROM jobloom_jobs WHERE id = :id AND parent_id IS NOT NULL

-- row: VersionRow
-- The version of the code that first ran a job (None: code without a version).
--   version: int | None

-- name: job_version
-- returns: VersionRow
SELECT version FROM jobloom_jobs WHERE id = :id

-- name: set_version
-- The first version recorded for a job stays: it is the version that first ran it.
UPDATE jobloom_jobs SET version = :version WHERE id = :id AND version IS NULL
