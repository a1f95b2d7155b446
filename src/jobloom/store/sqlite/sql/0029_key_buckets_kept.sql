-- A key's rate bucket row is kept while its key is in use, and deleted once it has been full for a while
-- (by a dispatch, every few seconds, not every time): saving it is then an update of the row in place.
-- No index holds full_at (the prune reads the binding's rows by the primary key).
DROP INDEX jobloom_key_buckets_full;
