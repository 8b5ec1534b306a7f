package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentd/agentd/service/store/internal/migrations"
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
type migration = migrations.Migration

// loadMigrations returns the embedded migrations in order.
func loadMigrations() ([]migration, error) {
	return migrations.Load(migrationFiles, "migrations")
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
	} else if err := checkSearchPath(ctx, tx); err != nil {
		return err
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
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, m.Version); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return tx.Commit(ctx)
}

// checkSearchPath refuses a connection whose search_path names no schema that exists
// (a search_path in the store's URL with a typo, say): the tables would have nowhere to
// go, and PostgreSQL's own error ("no schema has been selected to create in") names
// neither the schema nor the fix.
func checkSearchPath(ctx context.Context, tx pgx.Tx) error {
	var current *string
	if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&current); err != nil {
		return fmt.Errorf("read the current schema: %w", err)
	}
	if current != nil {
		return nil
	}
	var path string
	if err := tx.QueryRow(ctx, `SHOW search_path`).Scan(&path); err != nil {
		return fmt.Errorf("read search_path: %w", err)
	}
	return fmt.Errorf("the search_path (%s) names no schema that exists in this database: create it first (CREATE SCHEMA %s;), or name a schema that exists in search_path", path, strings.TrimSpace(strings.Split(path, ",")[0]))
}
