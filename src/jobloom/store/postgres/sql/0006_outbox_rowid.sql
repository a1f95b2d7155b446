-- Nothing changes on PostgreSQL: on SQLite this migration rebuilds the outbox without AUTOINCREMENT
-- (PostgreSQL's outbox is ordered by transaction id and sequence, and its projector keeps its cursor).
SELECT 1;
