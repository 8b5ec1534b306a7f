package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/service/store"
)

// PutGrant implements [store.Store]. A grant changes nothing of its thread's row: not
// its bytes, nor its updated_at. The reference to the thread locks the thread's row
// until the grant commits, so a grant is never left behind by a deletion beside it.
func (s *Store) PutGrant(ctx context.Context, g store.Grant) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO thread_grants
		(id, thread_id, agent, tool, arguments_hash, arguments, run_id, approval_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		g.ID, g.ThreadID, g.Agent, g.Tool, g.ArgumentsHash, g.Arguments, g.RunID, g.ApprovalID)
	switch code, _ := pgCode(err); {
	case code == uniqueViolation:
		return store.ErrExists
	case code == foreignKeyViolation:
		return store.ErrNotFound
	case err != nil:
		return fail(ctx, "put grant", err)
	}
	return nil
}

// Grants implements [store.Store].
func (s *Store) Grants(ctx context.Context, threadID string) ([]store.Grant, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, thread_id, agent, tool, arguments_hash, arguments, run_id, approval_id, created_at
		FROM thread_grants WHERE thread_id = $1 ORDER BY created_at, ord`, threadID)
	return collect(ctx, "grants", rows, err, func(row pgx.Row) (store.Grant, error) {
		var g store.Grant
		err := row.Scan(&g.ID, &g.ThreadID, &g.Agent, &g.Tool, &g.ArgumentsHash, &g.Arguments, &g.RunID, &g.ApprovalID, &g.CreatedAt)
		return g, err
	})
}

// RevokeGrant implements [store.Store].
func (s *Store) RevokeGrant(ctx context.Context, threadID, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM thread_grants WHERE thread_id = $1 AND id = $2`, threadID, id)
	switch {
	case err != nil:
		return fail(ctx, "revoke grant", err)
	case tag.RowsAffected() == 0:
		return store.ErrNotFound
	}
	return nil
}
