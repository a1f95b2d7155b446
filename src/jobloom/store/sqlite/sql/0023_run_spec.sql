-- A run's definition as data (jobloom.flows.spec): each node's kind, binding, upstream, options and
-- failure policy, and for a flow built at run time its payloads and fan-out items, so that any
-- worker carries the run on with the graph it started with. NULL: a run started before this column.
ALTER TABLE jobloom_runs ADD COLUMN spec TEXT;
