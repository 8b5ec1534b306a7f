-- Child runs: a run an agent's tool call started records its parent run, the call,
-- its tree's root and its depth (0 and empty strings for a root). ChildRuns reads a
-- run's children; Sweep keeps a tree's runs while its root is kept.
ALTER TABLE runs ADD COLUMN parent_run_id  TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN parent_call_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN root_run_id    TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN depth          INTEGER NOT NULL DEFAULT 0;

CREATE INDEX runs_parent ON runs (parent_run_id, created_at) WHERE parent_run_id != '';
