-- Grants: approvals that reach past their call, kept on their thread and gone with it.
-- A grant's id is unique among all threads' grants. arguments_hash is NULL for a grant
-- of any arguments; created_at is unix nanoseconds.
CREATE TABLE thread_grants (
	id             TEXT PRIMARY KEY,
	thread_id      TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
	agent          TEXT NOT NULL,
	tool           TEXT NOT NULL,
	arguments_hash BLOB,
	arguments      TEXT NOT NULL,
	run_id         TEXT NOT NULL,
	approval_id    TEXT NOT NULL,
	created_at     INTEGER NOT NULL
);

-- Grants reads a thread's grants, oldest first; deleting a thread finds them here.
CREATE INDEX thread_grants_thread ON thread_grants (thread_id, created_at);
