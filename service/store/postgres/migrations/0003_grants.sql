-- Grants: approvals that reach past their call, kept on their thread and gone with it.
-- A grant's id is unique among all threads' grants. arguments_hash is NULL for a grant
-- of any arguments. ord breaks ties between grants put within the same microsecond.
CREATE TABLE thread_grants (
	id             text PRIMARY KEY,
	ord            bigint GENERATED ALWAYS AS IDENTITY,
	thread_id      text NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
	agent          text NOT NULL,
	tool           text NOT NULL,
	arguments_hash bytea,
	arguments      text NOT NULL,
	run_id         text NOT NULL,
	approval_id    text NOT NULL,
	created_at     timestamptz NOT NULL DEFAULT now()
);

-- Grants reads a thread's grants, oldest first; deleting a thread finds them here.
CREATE INDEX thread_grants_thread ON thread_grants (thread_id, created_at, ord);
