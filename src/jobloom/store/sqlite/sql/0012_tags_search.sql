-- Tags and metadata, and the indexes that search pages through.
-- tags: the job's tags as a JSON array (NULL: none); meta: a JSON object (NULL: none). Both are
-- written at enqueue only, and never by the statements of a worker's cycle.
-- jobloom_job_tags holds one row per (tag, job): search by tag walks its primary key backwards from
-- the cursor, so the cost follows the tagged jobs, never the history. Rows are written only for jobs
-- enqueued with tags, and deleted with their job (prune_history_tags).
-- Searches by state read the partial indexes of each state: on SQLite an index's entries end with
-- the rowid (the job id), so jobloom_jobs_counted (binding, state) already orders by id.
ALTER TABLE jobloom_jobs ADD COLUMN tags TEXT;
ALTER TABLE jobloom_jobs ADD COLUMN meta TEXT;
CREATE TABLE jobloom_job_tags (
    tag    TEXT    NOT NULL,
    job_id INTEGER NOT NULL,
    PRIMARY KEY (tag, job_id)
) WITHOUT ROWID;
CREATE INDEX jobloom_job_tags_job ON jobloom_job_tags (job_id);
