-- The outbox without transaction ids. The projector reads the oldest events by seq and deletes the
-- ones it folds in the same transaction, so every event left is one not counted yet, and an event
-- whose transaction committed late is found on a later pass. Nothing reads the writing transaction's
-- id any more: its column (filled by a function call on every event insert) and its index go, and so
-- does the projector's last_xid.
DROP INDEX IF EXISTS jobloom_events_xid_seq;
ALTER TABLE jobloom_events DROP COLUMN IF EXISTS xid;
ALTER TABLE jobloom_projector DROP COLUMN IF EXISTS last_xid;
