-- Named queries of `jobloom reencrypt`: pages of stored content in key order, and compare-and-set
-- rewrites that change a value only if it is still the one read (a worker's write meanwhile wins).

-- row: CodedRow
-- A stored value of a job's content: its job (or run) key, the step or event name ('' for a job's own
-- payload and result), and the text as stored.
--   id: int, name: str, value: str | None

-- row: CodedRunRow
-- A flow run's stored input.
--   id: str, value: str

-- name: coded_payloads
-- returns: CodedRow
SELECT id, '' AS name, payload AS value FROM jobloom_jobs WHERE id > :after_id ORDER BY id LIMIT :limit

-- name: coded_results
-- returns: CodedRow
SELECT id, '' AS name, result AS value FROM jobloom_jobs
WHERE id > :after_id AND result IS NOT NULL ORDER BY id LIMIT :limit

-- name: coded_steps
-- returns: CodedRow
SELECT job_id AS id, name, result AS value FROM jobloom_steps
WHERE (job_id > :after_id OR (job_id = :after_id AND name > :after_name)) AND substr(name, 1, 5) = 'step:'
  AND result IS NOT NULL
ORDER BY job_id, name LIMIT :limit

-- name: coded_signals
-- returns: CodedRow
SELECT job_id AS id, name, data AS value FROM jobloom_signals
WHERE (job_id > :after_id OR (job_id = :after_id AND name > :after_name)) AND data IS NOT NULL
ORDER BY job_id, name LIMIT :limit

-- name: coded_run_inputs
-- returns: CodedRunRow
SELECT id, input AS value FROM jobloom_runs WHERE id > :after_id ORDER BY id LIMIT :limit

-- name: recode_payload
UPDATE jobloom_jobs SET payload = :new WHERE id = :id AND payload = :old

-- name: recode_result
UPDATE jobloom_jobs SET result = :new WHERE id = :id AND result = :old

-- name: recode_step
UPDATE jobloom_steps SET result = :new WHERE job_id = :id AND name = :name AND result = :old

-- name: recode_signal
UPDATE jobloom_signals SET data = :new WHERE job_id = :id AND name = :name AND data = :old

-- name: recode_run_input
UPDATE jobloom_runs SET input = :new WHERE id = :id AND input = :old
