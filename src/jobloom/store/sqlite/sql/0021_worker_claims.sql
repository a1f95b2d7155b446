-- Remote workers' claims and binding-limited tokens. claim_hash: the SHA-256 of the secret a remote
-- claim returned for the job's current attempt; its heartbeats and its report must present the secret
-- (jobloom.engine.remote). bindings: a worker token's bindings (comma-separated), the only ones it may
-- claim, heartbeat and complete; NULL: every binding.
ALTER TABLE jobloom_jobs ADD COLUMN claim_hash TEXT;
ALTER TABLE jobloom_tokens ADD COLUMN bindings TEXT;
