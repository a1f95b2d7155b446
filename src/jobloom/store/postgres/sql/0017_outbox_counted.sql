-- Outbox rows that count several events: a transaction that records many events of one kind for one
-- binding at one moment (a cycle's claims and outcomes, a batch enqueue) writes them as one row with
-- their number (n), the sum of their run times (duration), the longest (top) and, for run times, the
-- histogram bucket they share (bucket). Such a row names no job (job_id NULL); a row of one event is
-- written as before (n = 1, top and bucket NULL: read from duration).
ALTER TABLE jobloom_events ALTER COLUMN job_id DROP NOT NULL;
ALTER TABLE jobloom_events ADD COLUMN n integer NOT NULL DEFAULT 1;
ALTER TABLE jobloom_events ADD COLUMN top double precision;
ALTER TABLE jobloom_events ADD COLUMN bucket integer;
