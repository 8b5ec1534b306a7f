-- Replicas: each replica of a fleet says it is alive every third of its lease
-- (Heartbeat), with when it started and whether it drains, so that replicas can prefer
-- one another by age when they take runs up. seen_at is by the database's clock.
CREATE TABLE replicas (
	id         text PRIMARY KEY,
	started_at timestamptz NOT NULL,
	seen_at    timestamptz NOT NULL,
	draining   boolean NOT NULL
);
