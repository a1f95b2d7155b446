-- How many times each job was snoozed (Snooze): a performer's max_snoozes bounds it.
ALTER TABLE jobloom_jobs ADD COLUMN snoozes integer NOT NULL DEFAULT 0;
-- Bindings can be paused (their queued jobs wait; running ones finish; enqueue goes on), and workers
-- say which bindings they serve: one row per worker process, renewed with its heartbeats (seen_at,
-- every `beat` seconds) and deleted when it stops; a row not renewed for long is pruned by the others.
ALTER TABLE jobloom_bindings ADD COLUMN paused boolean NOT NULL DEFAULT false;
ALTER TABLE jobloom_bindings ADD COLUMN paused_at double precision;
CREATE TABLE jobloom_workers (
    name        text             PRIMARY KEY,
    host        text             NOT NULL,
    pid         integer          NOT NULL,
    bindings    text             NOT NULL,
    concurrency integer          NOT NULL,
    beat        double precision NOT NULL,
    started_at  double precision NOT NULL,
    seen_at     double precision NOT NULL
);
-- Batch performers: a binding's batch size and wait are stored with it (its dispatch hands out whole
-- batches, and its concurrency counts batches), and a running job carries its batch (the lowest job
-- id of the batch: unique among running batches) so that running batches can be counted.
ALTER TABLE jobloom_bindings ADD COLUMN batch_size integer;
ALTER TABLE jobloom_bindings ADD COLUMN batch_wait double precision;
ALTER TABLE jobloom_jobs ADD COLUMN batch bigint;
