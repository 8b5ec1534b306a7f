package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentd/agentd/service/store"
)

const threadColumns = `id, owner, agent, messages, bytes, created_at, updated_at`

func scanThread(sc scanner, extra ...any) (store.Thread, error) {
	var (
		t                store.Thread
		created, updated int64
	)
	dest := append([]any{&t.ID, &t.Owner, &t.Agent, &t.Messages, &t.Bytes, &created, &updated}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return store.Thread{}, err
	}
	t.CreatedAt, t.UpdatedAt = fromNanos(created), fromNanos(updated)
	return t, nil
}

// CreateThread implements [store.Store]. Whatever t says of them, the thread starts
// with no messages, created and updated now.
func (s *Store) CreateThread(ctx context.Context, t store.Thread) error {
	now := nanos(time.Now())
	return s.write(ctx, "create thread", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO threads (id, owner, agent, messages, bytes, created_at, updated_at)
			VALUES (?, ?, ?, 0, 0, ?, ?)`, t.ID, t.Owner, t.Agent, now, now)
		if isUniqueViolation(err) {
			return fmt.Errorf("thread %q: %w", t.ID, store.ErrExists)
		}
		return err
	})
}

// GetThread implements [store.Store].
func (s *Store) GetThread(ctx context.Context, id string) (store.Thread, error) {
	var active sql.NullString
	t, err := scanThread(s.r.QueryRowContext(ctx, `SELECT `+threadColumns+`,
		(SELECT r.id FROM runs r
			WHERE r.thread_id = threads.id AND r.exclusive AND r.status != 3)
		FROM threads WHERE id = ?`, id), &active)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Thread{}, fmt.Errorf("thread %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Thread{}, wrap(ctx, "get thread", err)
	}
	t.ActiveRunID = active.String
	return t, nil
}

// ListThreads implements [store.Store]. Threads updated at the same time come in
// order of id, so that a page ends at a well-defined place. An after that names no
// thread ends the listing: where the page would start is unknown, and the thread has
// most likely been deleted or swept since the page before.
func (s *Store) ListThreads(ctx context.Context, owner string, after string, limit int) ([]store.Thread, error) {
	if limit <= 0 {
		return nil, nil
	}
	var threads []store.Thread
	err := s.read(ctx, "list threads", func(tx *sql.Tx) error {
		var (
			rows *sql.Rows
			err  error
		)
		if after == "" {
			rows, err = tx.QueryContext(ctx, `SELECT `+threadColumns+` FROM threads
				WHERE owner = ? ORDER BY updated_at DESC, id LIMIT ?`, owner, limit)
		} else {
			var updated int64
			err = tx.QueryRowContext(ctx, `SELECT updated_at FROM threads WHERE id = ?`, after).Scan(&updated)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			rows, err = tx.QueryContext(ctx, `SELECT `+threadColumns+` FROM threads
				WHERE owner = ?1 AND updated_at <= ?2 AND (updated_at < ?2 OR id > ?3)
				ORDER BY updated_at DESC, id LIMIT ?4`, owner, updated, after, limit)
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			t, err := scanThread(rows)
			if err != nil {
				return err
			}
			threads = append(threads, t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return threads, nil
}

// DeleteThread implements [store.Store].
func (s *Store) DeleteThread(ctx context.Context, id string) error {
	return s.write(ctx, "delete thread", func(tx *sql.Tx) error {
		n, err := changed(tx.ExecContext(ctx, `DELETE FROM threads WHERE id = ?`, id))
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("thread %q: %w", id, store.ErrNotFound)
		}
		return nil
	})
}

// AppendMessages implements [store.Store]. It sets the thread's UpdatedAt to now.
func (s *Store) AppendMessages(ctx context.Context, threadID string, l store.Lease, msgs [][]byte) error {
	return s.write(ctx, "append messages", func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE `+heldBy, l.RunID, l.Holder, l.Epoch).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("run %q: %w", l.RunID, store.ErrFenced)
		}
		var next int64
		err := tx.QueryRowContext(ctx, `SELECT messages FROM threads WHERE id = ?`, threadID).Scan(&next)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("thread %q: %w", threadID, store.ErrNotFound)
		}
		if err != nil || len(msgs) == 0 {
			return err
		}
		var lastRun string
		err = tx.QueryRowContext(ctx, `SELECT run_id FROM thread_messages WHERE thread_id = ? ORDER BY idx DESC LIMIT 1`, threadID).Scan(&lastRun)
		switch {
		case err == nil && lastRun == l.RunID:
			return nil // the run's messages are in already
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		}
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO thread_messages (thread_id, idx, run_id, data) VALUES (?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		var size int64
		for i, m := range msgs {
			if _, err := stmt.ExecContext(ctx, threadID, next+int64(i), l.RunID, m); err != nil {
				return err
			}
			size += int64(len(m))
		}
		_, err = tx.ExecContext(ctx, `UPDATE threads SET messages = messages + ?, bytes = bytes + ?, updated_at = ?
			WHERE id = ?`, len(msgs), size, nanos(time.Now()), threadID)
		return err
	})
}

// ThreadMessages implements [store.Store].
func (s *Store) ThreadMessages(ctx context.Context, threadID string, from int64, limit int) ([]store.Message, error) {
	var msgs []store.Message
	err := s.read(ctx, "thread messages", func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM threads WHERE id = ?`, threadID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("thread %q: %w", threadID, store.ErrNotFound)
		}
		if limit <= 0 {
			return nil
		}
		rows, err := tx.QueryContext(ctx, `SELECT idx, run_id, data, data IS NULL FROM thread_messages
			WHERE thread_id = ? AND idx >= ? ORDER BY idx LIMIT ?`, threadID, max(from, 0), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				m    store.Message
				data blob
			)
			if err := rows.Scan(&m.Index, &m.RunID, &data.b, &data.null); err != nil {
				return err
			}
			m.Data = data.bytes()
			msgs = append(msgs, m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return msgs, nil
}
