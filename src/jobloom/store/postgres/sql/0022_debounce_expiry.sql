-- Debounced and expiring jobs. debounce_key: enqueues of a binding with the same key collapse into
-- the one job of that key that is still scheduled and never started (jobloom.engine.debounce), found
-- through jobloom_jobs_debounce. expires_at: the moment after which the job never starts; a worker's
-- cycle ends the unstarted jobs past it as 'expired', found through jobloom_jobs_expiring. The read
-- model counts those endings per minute and per hour (expired).
ALTER TABLE jobloom_jobs ADD COLUMN debounce_key text;
ALTER TABLE jobloom_jobs ADD COLUMN expires_at double precision;
CREATE INDEX jobloom_jobs_debounce ON jobloom_jobs (binding, debounce_key)
    WHERE debounce_key IS NOT NULL AND state = 'scheduled';
CREATE INDEX jobloom_jobs_expiring ON jobloom_jobs (expires_at)
    WHERE expires_at IS NOT NULL AND (state = 'scheduled' OR state = 'queued');
ALTER TABLE jobloom_stats ADD COLUMN expired bigint NOT NULL DEFAULT 0;
ALTER TABLE jobloom_stats_hourly ADD COLUMN expired bigint NOT NULL DEFAULT 0;
