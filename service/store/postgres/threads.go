package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/service/store"
)

const threadColumns = `t.id, t.owner, t.agent, t.messages, t.bytes, t.created_at, t.updated_at`

func scanThread(row pgx.Row, extra ...any) (store.Thread, error) {
	var t store.Thread
	err := row.Scan(append([]any{&t.ID, &t.Owner, &t.Agent, &t.Messages, &t.Bytes, &t.CreatedAt, &t.UpdatedAt}, extra...)...)
	return t, err
}

func (s *Store) CreateThread(ctx context.Context, t store.Thread) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO threads (id, owner, agent) VALUES ($1, $2, $3)`, t.ID, t.Owner, t.Agent)
	if code, _ := pgCode(err); code == uniqueViolation {
		return store.ErrExists
	}
	if err != nil {
		return fail(ctx, "create thread", err)
	}
	return nil
}

func (s *Store) GetThread(ctx context.Context, id string) (store.Thread, error) {
	var active *string
	t, err := scanThread(s.pool.QueryRow(ctx, `SELECT `+threadColumns+`, (`+activeRunSQL+`)
		FROM threads t WHERE t.id = $1`, id), &active)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Thread{}, store.ErrNotFound
	case err != nil:
		return store.Thread{}, fail(ctx, "get thread", err)
	}
	if active != nil {
		t.ActiveRunID = *active
	}
	return t, nil
}

// ListThreads pages by the position of the thread after: the threads that come after
// it in the order (updated_at descending, then id) whatever happened to the threads
// before it. An after that names no thread gives an empty page.
func (s *Store) ListThreads(ctx context.Context, owner string, after string, limit int) ([]store.Thread, error) {
	limit = max(limit, 0)
	var (
		rows pgx.Rows
		err  error
	)
	if after == "" {
		rows, err = s.pool.Query(ctx, `SELECT `+threadColumns+` FROM threads t
			WHERE t.owner = $1 ORDER BY t.updated_at DESC, t.id LIMIT $2`, owner, limit)
	} else {
		// The condition on updated_at alone bounds the index range; the next leaves
		// out the threads before after that share its updated_at. The subqueries run
		// once, and when after names no thread they are NULL, which matches nothing.
		rows, err = s.pool.Query(ctx, `SELECT `+threadColumns+` FROM threads t
			WHERE t.owner = $1 AND t.updated_at <= (SELECT updated_at FROM threads WHERE id = $2)
				AND (t.updated_at < (SELECT updated_at FROM threads WHERE id = $2) OR t.id > $2)
			ORDER BY t.updated_at DESC, t.id LIMIT $3`, owner, after, limit)
	}
	return collect(ctx, "list threads", rows, err, func(row pgx.Row) (store.Thread, error) { return scanThread(row) })
}

func (s *Store) DeleteThread(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM threads WHERE id = $1`, id)
	switch {
	case err != nil:
		return fail(ctx, "delete thread", err)
	case tag.RowsAffected() == 0:
		return store.ErrNotFound
	}
	return nil
}

// appendMessagesSQL adds messages to a thread for the run a lease holds, in one
// statement: it locks the run's row for share, so that no claim moves the run before
// the messages commit, then, unless the thread's last message is the run's already,
// counts the messages into their thread and inserts them at the indexes that follow
// the thread's count before. The update locks the thread's
// row, so a concurrent append waits, then re-reads the count and follows. It returns
// whether the lease held the run and whether the thread was there.
const appendMessagesSQL = `WITH run AS MATERIALIZED (
	SELECT id FROM runs WHERE ` + heldBy + ` FOR SHARE
), done AS MATERIALIZED (
	SELECT coalesce((SELECT run_id FROM thread_messages WHERE thread_id = $4 ORDER BY idx DESC LIMIT 1), '') = $1 AS yes
), t AS (
	UPDATE threads SET messages = messages + $5::bigint, bytes = bytes + $6::bigint, updated_at = now()
	WHERE id = $4 AND EXISTS (SELECT FROM run) AND NOT (SELECT yes FROM done) RETURNING messages - $5::bigint AS start
), m AS (
	INSERT INTO thread_messages (thread_id, idx, run_id, data)
	SELECT $4::text, t.start + m.ord - 1, $1::text, m.data FROM t, unnest($7::bytea[]) WITH ORDINALITY AS m(data, ord)
)
SELECT EXISTS (SELECT FROM run), EXISTS (SELECT FROM t) OR ((SELECT yes FROM done) AND EXISTS (SELECT FROM threads WHERE id = $4))`

// AppendMessages with no messages still marks the thread updated, as an append does.
func (s *Store) AppendMessages(ctx context.Context, threadID string, l store.Lease, msgs [][]byte) error {
	var size int64
	for _, m := range msgs {
		size += int64(len(m))
	}
	var held, found bool
	err := s.pool.QueryRow(ctx, appendMessagesSQL, l.RunID, l.Holder, l.Epoch, threadID, int64(len(msgs)), size, msgs).
		Scan(&held, &found)
	switch {
	case err != nil:
		return fail(ctx, "append messages", err)
	case !held:
		return store.ErrFenced
	case !found:
		return store.ErrNotFound
	}
	return nil
}

// ThreadMessages reads the thread and its messages in one statement, so that a thread
// with none from from on is told from a missing one.
func (s *Store) ThreadMessages(ctx context.Context, threadID string, from int64, limit int) ([]store.Message, error) {
	if from < 0 {
		// No message has a negative index; the query still tells whether the thread
		// exists.
		from, limit = 0, 0
	}
	rows, err := s.pool.Query(ctx, `SELECT m.idx, m.run_id, m.data FROM threads t
		LEFT JOIN LATERAL (
			SELECT idx, run_id, data FROM thread_messages WHERE thread_id = t.id AND idx >= $2 ORDER BY idx LIMIT $3
		) m ON true
		WHERE t.id = $1 ORDER BY m.idx`, threadID, from, max(limit, 0))
	if err != nil {
		return nil, fail(ctx, "thread messages", err)
	}
	defer rows.Close()
	var (
		found bool
		out   []store.Message
	)
	for rows.Next() {
		var (
			idx   *int64
			runID *string
			data  []byte
		)
		if err := rows.Scan(&idx, &runID, &data); err != nil {
			return nil, fail(ctx, "thread messages", err)
		}
		found = true
		if idx != nil {
			out = append(out, store.Message{Index: *idx, RunID: *runID, Data: data})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fail(ctx, "thread messages", err)
	}
	if !found {
		return nil, store.ErrNotFound
	}
	return out, nil
}
