-- name: set_progress
-- Fenced like a heartbeat: only the job's current, running attempt of this worker records progress
-- (PostgreSQL: `(state || '')` keeps it on the primary key).
UPDATE jobloom_jobs SET progress = :progress
WHERE id = :id AND attempt = :attempt AND lease_owner = :worker AND {sqlite: state}{postgres: (state || '')} = 'running'
