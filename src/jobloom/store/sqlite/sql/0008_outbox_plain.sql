-- Nothing changes on SQLite: its outbox never had a transaction id (PostgreSQL drops its xid column
-- and index here). The projector's unused last_xid column stays: dropping a column needs SQLite 3.35.
SELECT 1;
