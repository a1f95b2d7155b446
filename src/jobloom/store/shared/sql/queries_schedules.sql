-- Named queries of schedules (jobloom_schedules). The transaction that fires a schedule holds its row
-- (lock_schedule_row: PostgreSQL's row lock, SQLite's write lock), which serializes it against every
-- other worker.

-- row: StoredScheduleRow
-- A schedule's stored state (``jobloom_schedules``).
--   name: str, origin: str, definition: str, paused: bool, last_tick: float | None, next_run: float | None
--   last_run_at: float | None, last_job_id: int | None, last_run_id: str | None, last_error: str | None
--   last_error_at: float | None, fired: int, skipped: int

-- name: list_schedule_rows
-- returns: StoredScheduleRow
SELECT name, origin, definition, paused, last_tick, next_run, last_run_at, last_job_id, last_run_id,
       last_error, last_error_at, fired, skipped
FROM jobloom_schedules ORDER BY name

-- name: get_schedule_row
-- returns: StoredScheduleRow
SELECT name, origin, definition, paused, last_tick, next_run, last_run_at, last_job_id, last_run_id,
       last_error, last_error_at, fired, skipped
FROM jobloom_schedules WHERE name = :name

-- name: lock_schedule_row
-- returns: StoredScheduleRow
SELECT name, origin, definition, paused, last_tick, next_run, last_run_at, last_job_id, last_run_id,
       last_error, last_error_at, fired, skipped
FROM jobloom_schedules WHERE name = :name
FOR UPDATE

-- name: insert_schedule_row
INSERT INTO jobloom_schedules (name, origin, definition, last_tick, next_run, created_at, updated_at)
VALUES (:name, :origin, :definition, :last_tick, :next_run, :now, :now)
ON CONFLICT (name) DO NOTHING

-- name: sync_code_schedule
INSERT INTO jobloom_schedules (name, origin, definition, last_tick, next_run, created_at, updated_at)
VALUES (:name, :origin, :definition, :last_tick, :next_run, :now, :now)
ON CONFLICT (name) DO UPDATE SET definition = excluded.definition, origin = excluded.origin,
                                 updated_at = excluded.updated_at
WHERE jobloom_schedules.definition <> excluded.definition OR jobloom_schedules.origin <> excluded.origin

-- name: replace_runtime_schedule
UPDATE jobloom_schedules SET definition = :definition, origin = 'runtime', updated_at = :now WHERE name = :name

-- name: save_schedule_state
UPDATE jobloom_schedules
SET last_tick = :last_tick, next_run = :next_run, last_run_at = :last_run_at, last_job_id = :last_job_id,
    last_run_id = :last_run_id, last_error = :last_error, last_error_at = :last_error_at, fired = :fired,
    skipped = :skipped, updated_at = :now
WHERE name = :name

-- name: set_schedule_paused
UPDATE jobloom_schedules SET paused = :paused::boolean, last_tick = :last_tick, next_run = :next_run, updated_at = :now
WHERE name = :name

-- name: delete_schedule_row
DELETE FROM jobloom_schedules WHERE name = :name AND origin = 'runtime'

-- row: JobStateRow
-- A job's state.
--   state: str

-- name: schedule_job_state
-- returns: JobStateRow
SELECT state FROM jobloom_jobs WHERE id = :id

