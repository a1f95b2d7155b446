-- Pausing bindings, and the registry of workers (which bindings each worker process serves).

-- name: hold_dispatch
-- A worker's cycle takes a shared lock per binding it may dispatch, before any other lock and before
-- reading the bindings' rows; pause_dispatch takes it exclusively. A pause therefore waits for the
-- cycles already dispatching the binding to commit, and a cycle that starts meanwhile waits for the
-- pause and then reads the binding as paused: nothing is claimed after a pause commits. (Advisory
-- locks live in the lock table, not in rows: no write, and shared holders never wait for each other.)
SELECT pg_advisory_xact_lock_shared(hashtext(current_schema() || chr(31) || 'jobloom.dispatch'), hashtext(b))
FROM unnest(:bindings::text[]) AS b

-- name: pause_dispatch
SELECT pg_advisory_xact_lock(hashtext(current_schema() || chr(31) || 'jobloom.dispatch'), hashtext(:binding::text))

