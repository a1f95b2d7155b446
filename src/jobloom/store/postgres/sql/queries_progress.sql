-- name: set_progress__bulk
-- The progress of many jobs in one statement, their rows locked in id order (the lock order).
WITH r AS (
    SELECT * FROM json_to_recordset(:rows::json) AS r(id bigint, attempt int, worker text, progress text)
), held AS (
    SELECT j.id FROM jobloom_jobs AS j JOIN r ON j.id = r.id AND j.attempt = r.attempt AND j.lease_owner = r.worker
    WHERE (j.state || '') = 'running'
    ORDER BY j.id
    FOR UPDATE OF j
)
UPDATE jobloom_jobs AS j SET progress = r.progress FROM held JOIN r ON r.id = held.id WHERE j.id = held.id
