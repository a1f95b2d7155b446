-- Each binding's retention (JSON: state -> seconds), stored by the app that performs the binding
-- when its workers start, so that every app prunes the binding's jobs by it (an app that only
-- enqueues, or the CLI, does not know the binding's performer). NULL: the default retention.
ALTER TABLE jobloom_bindings ADD COLUMN retention TEXT;
-- Counts of waiting, failed, stalled and cancelled jobs per binding read this index instead of the
-- table (the other active states have partial indexes of their own; succeeded and skipped jobs,
-- most of the history, are counted only on request).
CREATE INDEX jobloom_jobs_counted ON jobloom_jobs (binding, state)
    WHERE state IN ('waiting', 'failed', 'stalled', 'cancelled');
