-- Jobs that call other jobs and versions of long-lived work. parent_id: the job whose
-- ``self.call`` made this one (its child wakes it when it ends; jobloom.engine.calls). version: the
-- performer's ``version`` that first ran the job (stored with its first durable record or its first
-- report), so that changed code can tell a job it resumes from one it starts.
ALTER TABLE jobloom_jobs ADD COLUMN parent_id INTEGER;
ALTER TABLE jobloom_jobs ADD COLUMN version INTEGER;
CREATE INDEX jobloom_jobs_parent ON jobloom_jobs (parent_id) WHERE parent_id IS NOT NULL;
