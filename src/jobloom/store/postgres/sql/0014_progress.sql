-- A running job's latest progress, as JSON: {"fraction", "message", "at", "attempt"}. Written by the
-- worker at most once a second per worker (with its heartbeat when one is due), never by the hot
-- statements (claim, finish_attempt, enqueue).
ALTER TABLE jobloom_jobs ADD COLUMN progress TEXT;
