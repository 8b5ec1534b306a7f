-- Replicas: each replica says it is alive every third of its lease (Heartbeat), with
-- when it started and whether it drains; with SQLite there is one, but the store keeps
-- what any keeps. started_at and seen_at are unix nanoseconds.
CREATE TABLE replicas (
	id         TEXT PRIMARY KEY,
	started_at INTEGER NOT NULL,
	seen_at    INTEGER NOT NULL,
	draining   INTEGER NOT NULL
);
