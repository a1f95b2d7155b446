-- Outbox rows that count several events: a transaction that records many events of one kind for one
-- binding at one moment (a cycle's claims and outcomes, a batch enqueue) writes them as one row with
-- their number (n), the sum of their run times (duration), the longest (top) and, for run times, the
-- histogram bucket they share (bucket). Such a row names no job (job_id NULL); a row of one event is
-- written as before (n = 1, top and bucket NULL: read from duration). The table is rebuilt because
-- SQLite cannot drop a NOT NULL; the unfolded events keep their seqs.
CREATE TABLE jobloom_events_counted (
    seq      INTEGER PRIMARY KEY,
    at       REAL    NOT NULL,
    job_id   INTEGER,
    binding  TEXT    NOT NULL,
    kind     TEXT    NOT NULL,
    attempt  INTEGER NOT NULL DEFAULT 0,
    duration REAL,
    n        INTEGER NOT NULL DEFAULT 1,
    top      REAL,
    bucket   INTEGER
);
INSERT INTO jobloom_events_counted (seq, at, job_id, binding, kind, attempt, duration)
SELECT seq, at, job_id, binding, kind, attempt, duration FROM jobloom_events ORDER BY seq;
DROP TABLE jobloom_events;
ALTER TABLE jobloom_events_counted RENAME TO jobloom_events;
