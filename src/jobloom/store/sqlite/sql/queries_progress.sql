-- name: set_progress
-- Fenced like a heartbeat: only the job's current, running attempt of this worker records progress.
UPDATE jobloom_jobs SET progress = :progress
WHERE id = :id AND attempt = :attempt AND lease_owner = :worker AND state = 'running'
