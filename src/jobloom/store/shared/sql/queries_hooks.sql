-- Performers' lifecycle hooks to run (jobloom_hooks): written with the outcome, deleted once run.

-- name: insert_hook
INSERT INTO jobloom_hooks (job_id, attempt, kind, binding, error, due_at)
VALUES (:job_id, :attempt, :kind, :binding, :error, :due_at)
ON CONFLICT DO NOTHING;

-- name: delete_hook
DELETE FROM jobloom_hooks WHERE job_id = :job_id AND attempt = :attempt AND kind = :kind;

-- row: HookRow
-- A lifecycle hook to run: its job and attempt, which hook (success, failure or retry), the binding
-- and the attempt's error.
--   job_id: int, attempt: int, kind: str, binding: str, error: str | None

-- name: claim_hooks
-- returns: HookRow
UPDATE jobloom_hooks SET due_at = :until
WHERE (job_id, attempt, kind) IN (
    SELECT job_id, attempt, kind FROM jobloom_hooks
    WHERE due_at <= :now AND binding = ANY(:bindings::text[])
    ORDER BY due_at LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
RETURNING job_id, attempt, kind, binding, error;

-- name: count_hooks
-- returns: CountRow
SELECT count(*) AS n FROM jobloom_hooks;
