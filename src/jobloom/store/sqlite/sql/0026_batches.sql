-- Batches of jobs with callbacks. A batch's jobs are rows of jobloom_batch_jobs; its callbacks
-- (on_complete, on_success) are jobs that depend on every job of the batch (jobloom_dependencies),
-- inserted waiting with it, and jobloom_dependency_waits.batch_id names the batch whose counts are
-- merged into a callback's payload when it is released.
CREATE TABLE jobloom_batches (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    on_complete INTEGER,
    on_success  INTEGER,
    created_at  REAL    NOT NULL
);
CREATE TABLE jobloom_batch_jobs (
    batch_id INTEGER NOT NULL,
    job_id   INTEGER NOT NULL,
    PRIMARY KEY (batch_id, job_id)
) WITHOUT ROWID;
CREATE INDEX jobloom_batch_jobs_job ON jobloom_batch_jobs (job_id);
ALTER TABLE jobloom_dependency_waits ADD COLUMN batch_id INTEGER;
