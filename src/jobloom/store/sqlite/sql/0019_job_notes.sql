-- What people did to a job by hand, and who (the API token's name): enqueued it from the dashboard,
-- started the run it belongs to, sent it an event, triggered the schedule that made it, retried,
-- cancelled it. A job's page shows these in its timeline; they go with the job's other history.
CREATE TABLE jobloom_job_notes (
    id     INTEGER PRIMARY KEY,
    job_id INTEGER NOT NULL,
    at     REAL    NOT NULL,
    actor  TEXT    NOT NULL,
    what   TEXT    NOT NULL
);
CREATE INDEX jobloom_job_notes_job ON jobloom_job_notes (job_id, id);
