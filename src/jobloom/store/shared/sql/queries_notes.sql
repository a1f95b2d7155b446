-- Named queries of the notes people leave on jobs (jobloom_job_notes).

-- name: add_job_note
INSERT INTO jobloom_job_notes (job_id, at, actor, what) VALUES (:job_id, :at, :actor, :what)

-- row: NoteRow
-- A note on a job: when, who (an API token's name) and what they did.
--   at: float, actor: str, what: str

-- name: job_notes
-- returns: NoteRow
SELECT at, actor, what FROM jobloom_job_notes WHERE job_id = :job_id ORDER BY id

-- name: prune_history_notes
DELETE FROM jobloom_job_notes WHERE job_id = ANY(:ids::bigint[])

