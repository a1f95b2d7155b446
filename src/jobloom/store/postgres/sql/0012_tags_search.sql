-- Tags and metadata, and the indexes that search pages through.
-- tags: the job's tags as a JSON array (NULL: none); meta: a JSON object (NULL: none). Both are
-- written at enqueue only, and never by the statements of a worker's cycle.
-- jobloom_job_tags holds one row per (tag, job): search by tag walks its primary key backwards from
-- the cursor, so the cost follows the tagged jobs, never the history. A side table rather than a GIN
-- index on the jobs table: a job's row is written again at every state change, and a GIN entry would
-- be written with it; the side table is written once, at enqueue, and only for jobs with tags.
-- Rows are deleted with their job (prune_history_tags).
ALTER TABLE jobloom_jobs ADD COLUMN tags text;
ALTER TABLE jobloom_jobs ADD COLUMN meta text;
CREATE TABLE jobloom_job_tags (
    tag    text   NOT NULL,
    job_id bigint NOT NULL,
    PRIMARY KEY (tag, job_id)
);
CREATE INDEX jobloom_job_tags_job ON jobloom_job_tags (job_id);
-- The index of waiting, failed, stalled and cancelled jobs ends with the id, so that a search of one
-- state of a binding walks it in id order from the cursor (the same predicate; one entry per job, as
-- before, eight bytes wider).
DROP INDEX jobloom_jobs_counted;
CREATE INDEX jobloom_jobs_counted ON jobloom_jobs (binding, state, id)
    WHERE (state = 'waiting' OR state = 'failed' OR state = 'stalled' OR state = 'cancelled');
