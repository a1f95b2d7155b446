-- A key's bucket that a dispatch leaves full again within moments (a key rate far above the key's
-- starts) is not saved: the binding's row keeps when the last of those is full (key_full_at), and no
-- later dispatch of the binding records its starts before then, so a key without a row is still a full
-- bucket at every dispatch's time.
ALTER TABLE jobloom_bindings ADD COLUMN key_full_at double precision;
