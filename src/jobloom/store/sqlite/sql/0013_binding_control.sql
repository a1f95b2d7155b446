-- How many times each job was snoozed (Snooze): a performer's max_snoozes bounds it.
ALTER TABLE jobloom_jobs ADD COLUMN snoozes integer NOT NULL DEFAULT 0;
-- Bindings can be paused (their queued jobs wait; running ones finish; enqueue goes on), and workers
-- say which bindings they serve: one row per worker process, renewed with its heartbeats (seen_at,
-- every `beat` seconds) and deleted when it stops; a row not renewed for long is pruned by the others.
ALTER TABLE jobloom_bindings ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobloom_bindings ADD COLUMN paused_at REAL;
CREATE TABLE jobloom_workers (
    name        TEXT    PRIMARY KEY,
    host        TEXT    NOT NULL,
    pid         INTEGER NOT NULL,
    bindings    TEXT    NOT NULL,
    concurrency INTEGER NOT NULL,
    beat        REAL    NOT NULL,
    started_at  REAL    NOT NULL,
    seen_at     REAL    NOT NULL
);
-- Batch performers: a binding's batch size and wait are stored with it (its dispatch hands out whole
-- batches, and its concurrency counts batches), and a running job carries its batch (the lowest job
-- id of the batch: unique among running batches) so that running batches can be counted.
ALTER TABLE jobloom_bindings ADD COLUMN batch_size integer;
ALTER TABLE jobloom_bindings ADD COLUMN batch_wait REAL;
ALTER TABLE jobloom_jobs ADD COLUMN batch INTEGER;
