-- Each binding's enqueue rules (JSON: default priority, max_attempts, delivery, timeout, unique_for,
-- whether its concurrency key is computed from the payload, the payload's JSON Schema), stored by the
-- app that performs the binding when its workers start, so that an app without the performer
-- (`jobloom serve --url`) enqueues the binding's jobs as its own app would. NULL: not known here.
ALTER TABLE jobloom_bindings ADD COLUMN rules text;
