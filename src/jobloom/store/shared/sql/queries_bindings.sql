-- Pausing bindings, and the registry of workers (which bindings each worker process serves).

-- name: set_paused
INSERT INTO jobloom_bindings (binding, paused, paused_at, updated_at)
VALUES (:binding, :paused, CASE WHEN :paused THEN :now::double precision END, :now)
ON CONFLICT (binding) DO UPDATE SET paused = excluded.paused, paused_at = excluded.paused_at,
    updated_at = excluded.updated_at

-- name: binding_known
SELECT 1 FROM jobloom_bindings WHERE binding = :binding

-- row: RulesRow
-- A binding's stored enqueue rules (JSON; None: none stored), and whether a worker registered it.
--   binding: str, registered: bool, rules: str | None

-- name: binding_rules
-- returns: RulesRow
-- Every binding's enqueue rules as the app performing it stored them (NULL: none stored), and whether
-- a worker registered it at all (workers store the backoff; `limits set` does not).
SELECT binding, backoff IS NOT NULL AS registered, rules FROM jobloom_bindings ORDER BY binding

-- name: beat_worker
-- A worker's registry row, written when it starts and renewed with its heartbeats.
INSERT INTO jobloom_workers (name, host, pid, bindings, concurrency, beat, started_at, seen_at)
VALUES (:name, :host, :pid, :bindings, :concurrency, :beat, :now, :now)
ON CONFLICT (name) DO UPDATE SET seen_at = excluded.seen_at, bindings = excluded.bindings

-- name: prune_workers
-- Rows of workers gone without a word (killed): not renewed for ten of their heartbeat intervals.
DELETE FROM jobloom_workers WHERE seen_at + 10 * beat < :now

-- name: forget_worker
DELETE FROM jobloom_workers WHERE name = :name

-- row: WorkerRow
-- A live worker process in the registry of workers.
--   name: str, host: str, pid: int, bindings: str, concurrency: int, beat: float, started_at: float
--   seen_at: float

-- name: list_workers
-- returns: WorkerRow
SELECT name, host, pid, bindings, concurrency, beat, started_at, seen_at FROM jobloom_workers ORDER BY name

