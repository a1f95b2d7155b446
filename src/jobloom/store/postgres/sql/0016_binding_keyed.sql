-- Whether a binding's performer has a concurrency_key function, stored when a worker registers it, so
-- that `limits list` shows a per-key limit only for bindings whose jobs have keys (NULL: not known).
ALTER TABLE jobloom_bindings ADD COLUMN keyed boolean;
