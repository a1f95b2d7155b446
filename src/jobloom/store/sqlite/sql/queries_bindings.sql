-- Pausing bindings, and the registry of workers (which bindings each worker process serves).

-- name: hold_dispatch
-- Nothing to hold: every write transaction holds the database's write lock, so a pause and a cycle
-- that dispatches are serialized already (PostgreSQL takes a lock here).
SELECT 1 WHERE 0

-- name: pause_dispatch
SELECT 1 WHERE 0

