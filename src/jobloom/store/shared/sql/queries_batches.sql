-- Batches of jobs with callbacks (jobloom.engine.job_batches).

-- name: insert_batch
-- returns: JobIdRow
INSERT INTO jobloom_batches (on_complete, on_success, created_at) VALUES (:on_complete, :on_success, :now)
RETURNING id

-- name: insert_batch_job
INSERT INTO jobloom_batch_jobs (batch_id, job_id) VALUES (:batch_id, :job_id)

-- row: BatchRow
-- A batch of jobs (``jobloom_batches``): the ids of its callbacks' jobs.
--   id: int, on_complete: int | None, on_success: int | None, created_at: float

-- name: get_batch
-- returns: BatchRow
SELECT id, on_complete, on_success, created_at FROM jobloom_batches WHERE id = :id

-- name: lock_batch
-- returns: BatchRow
-- Adding jobs to a batch: one at a time per batch.
SELECT id, on_complete, on_success, created_at FROM jobloom_batches WHERE id = :id FOR UPDATE

-- row: StateNRow
-- A count of jobs in one state.
--   state: str, n: int

-- name: batch_counts
-- returns: StateNRow
-- A batch's jobs by state (a job deleted since is not counted).
SELECT j.state, count(*) AS n FROM jobloom_batch_jobs b JOIN jobloom_jobs j ON j.id = b.job_id
WHERE b.batch_id = :id GROUP BY j.state

-- name: batch_job_ids
-- returns: JobIdRow
SELECT job_id AS id FROM jobloom_batch_jobs WHERE batch_id = :id ORDER BY job_id

-- name: batch_of_job
-- returns: JobIdRow
SELECT batch_id AS id FROM jobloom_batch_jobs WHERE job_id = :id ORDER BY batch_id LIMIT 1

-- name: lock_running_claim
-- returns: JobIdRow
-- The job of a running attempt, locked: what it adds to its batch is added before its own ending. Fenced
-- by the claim (owner and started_at), as the attempt's report is: the run of a lost claim adds nothing.
SELECT id FROM jobloom_jobs
WHERE id = :id AND attempt = :attempt AND state = 'running' AND lease_owner = :worker AND started_at = :started_at
FOR UPDATE

-- name: count_up_dependencies
-- returns: CountdownRow
-- Jobs added to a batch whose callback still waits: its countdown grows (a countdown at zero was
-- released already and is left alone).
UPDATE jobloom_dependency_waits SET pending = pending + :n WHERE job_id = :job_id AND pending > 0
RETURNING job_id, pending, on_failure, batch_id

-- name: set_callback_payload
-- A batch's callback, about to be released: its payload with the batch's counts merged in.
UPDATE jobloom_jobs SET payload = :payload WHERE id = :id AND state = 'waiting'
