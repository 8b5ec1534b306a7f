package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/agentd/agentd/service/store"
)

// PutGrant implements [store.Store]. A grant changes nothing of its thread's row: not
// its bytes, nor its updated_at.
func (s *Store) PutGrant(ctx context.Context, g store.Grant) error {
	return s.write(ctx, "put grant", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO thread_grants
			(id, thread_id, agent, tool, arguments_hash, arguments, run_id, approval_id, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			g.ID, g.ThreadID, g.Agent, g.Tool, g.ArgumentsHash, g.Arguments, g.RunID, g.ApprovalID, nanos(time.Now()))
		switch {
		case isUniqueViolation(err):
			return fmt.Errorf("grant %q: %w", g.ID, store.ErrExists)
		case isForeignKeyViolation(err):
			return fmt.Errorf("thread %q: %w", g.ThreadID, store.ErrNotFound)
		}
		return err
	})
}

// Grants implements [store.Store]. rowid breaks ties between grants put in the same
// nanosecond in the order they were inserted.
func (s *Store) Grants(ctx context.Context, threadID string) ([]store.Grant, error) {
	var out []store.Grant
	err := s.read(ctx, "grants", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, thread_id, agent, tool, arguments_hash, arguments_hash IS NULL,
			arguments, run_id, approval_id, created_at
			FROM thread_grants WHERE thread_id = ? ORDER BY created_at, rowid`, threadID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				g       store.Grant
				hash    blob
				created int64
			)
			if err := rows.Scan(&g.ID, &g.ThreadID, &g.Agent, &g.Tool, &hash.b, &hash.null,
				&g.Arguments, &g.RunID, &g.ApprovalID, &created); err != nil {
				return err
			}
			// An empty hash matches no arguments; only NULL is a grant of any.
			g.ArgumentsHash, g.CreatedAt = hash.bytes(), fromNanos(created)
			out = append(out, g)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RevokeGrant implements [store.Store].
func (s *Store) RevokeGrant(ctx context.Context, threadID, id string) error {
	return s.write(ctx, "revoke grant", func(tx *sql.Tx) error {
		n, err := changed(tx.ExecContext(ctx, `DELETE FROM thread_grants WHERE thread_id = ? AND id = ?`, threadID, id))
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("grant %q of thread %q: %w", id, threadID, store.ErrNotFound)
		}
		return nil
	})
}
