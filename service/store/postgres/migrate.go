package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNewerSchema is Open's error for a database that a newer agentd has migrated past
// what this one knows: using it could lose what the newer schema keeps.
var ErrNewerSchema = errors.New("postgres: database schema is newer than this agentd")

// migrationLock is the key of the advisory lock that migrations hold, so that replicas
// starting at once apply each migration once. It is the same for every schema: Open
// migrates in milliseconds, and one key cannot collide with another schema's.
const migrationLock int64 = 0x6167656e7464 // "agentd"

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one step of the schema, applied once and recorded in schema_migrations.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations returns the embedded migrations in order. Their files are named
// NNNN_what.sql and numbered from 1 with no gap, so that the highest version applied
// says exactly which steps a database has had.
func loadMigrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	ms := make([]migration, 0, len(names))
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name is not NNNN_what.sql", base)
		}
		text, err := migrationFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(text)})
	}
	// fs.Glob returns names sorted, and the zero-padded numbers sort with them.
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d", m.name, i+1)
		}
	}
	return ms, nil
}

// migrate brings the database up to the newest of ms in one transaction, and refuses
// a database that is ahead of ms. The transaction holds an advisory lock from its
// first statement, so a replica that starts while another migrates waits for it and
// then finds the schema up to date; a migration that fails leaves nothing behind.
// schema, unless empty, is created first: the pool's search_path names it already.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, ms []migration) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	if schema != "" {
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
			return fmt.Errorf("create schema %s: %w", schema, err)
		}
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var current int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if known := len(ms); current > known {
		return fmt.Errorf("%w: the database is at version %d, this agentd knows up to %d", ErrNewerSchema, current, known)
	}
	for _, m := range ms[current:] {
		// Exec with no arguments uses the simple protocol, which runs a file of
		// several statements.
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, m.version); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return tx.Commit(ctx)
}
