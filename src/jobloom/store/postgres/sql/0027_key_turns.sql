-- Limits between the concurrency keys of a binding. key_rules: the performer's code values (JSON:
-- fairness, key_weights, key_rate, key_burst), stored when a worker registers the binding (NULL: none).
-- turn_key, turn_used: whose turn it is under round-robin fairness (the key that started last, NULL
-- for the jobs without a key or before any start) and how many starts that turn has had.
ALTER TABLE jobloom_bindings ADD COLUMN key_rules text;
ALTER TABLE jobloom_bindings ADD COLUMN turn_key text;
ALTER TABLE jobloom_bindings ADD COLUMN turn_used integer;
-- One token bucket per concurrency key of a binding with a key_rate_limit, only while it is not full:
-- full_at is when it will be, and a dispatch deletes the rows past it (a missing row is a full bucket).
CREATE TABLE jobloom_key_buckets (
    binding         text             NOT NULL,
    concurrency_key text             NOT NULL,
    tokens          double precision NOT NULL,
    tokens_at       double precision NOT NULL,
    full_at         double precision NOT NULL,
    PRIMARY KEY (binding, concurrency_key)
);
CREATE INDEX jobloom_key_buckets_full ON jobloom_key_buckets (binding, full_at);
-- The queued jobs of a binding by key, then by priority within the key: the walk over keys in turn.
CREATE INDEX jobloom_jobs_queued_key ON jobloom_jobs (binding, concurrency_key COLLATE "C", priority DESC, run_at, id)
    WHERE state = 'queued';
