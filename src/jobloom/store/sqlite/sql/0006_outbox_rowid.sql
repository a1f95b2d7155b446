-- The outbox keyed by a plain rowid instead of AUTOINCREMENT, which read and rewrote the outbox's row
-- in sqlite_sequence for every event inserted (about 0.5 µs an event, two events per job run).
-- Without AUTOINCREMENT an event's seq is one more than the largest still in the table, so seqs
-- restart once the projector has folded and deleted every event: the projector therefore reads the
-- oldest events in the outbox, not those above its cursor (each fold deletes the events it counts,
-- in the same transaction, so every event still in the table is one not counted yet).
CREATE TABLE jobloom_events_rowid (
    seq      INTEGER PRIMARY KEY,
    at       REAL    NOT NULL,
    job_id   INTEGER NOT NULL,
    binding  TEXT    NOT NULL,
    kind     TEXT    NOT NULL,
    attempt  INTEGER NOT NULL DEFAULT 0,
    duration REAL
);
INSERT INTO jobloom_events_rowid (seq, at, job_id, binding, kind, attempt, duration)
SELECT seq, at, job_id, binding, kind, attempt, duration FROM jobloom_events ORDER BY seq;
DROP TABLE jobloom_events;
ALTER TABLE jobloom_events_rowid RENAME TO jobloom_events;
DELETE FROM sqlite_sequence WHERE name = 'jobloom_events';
