package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/agentd/agentd/service/store/internal/migrations"
)

// ErrNewerSchema is Open's error for a database that a newer agentd has migrated past
// what this one knows: using it could lose what the newer schema keeps.
var ErrNewerSchema = errors.New("sqlite: database schema is newer than this agentd")

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one step of the schema, applied once and recorded in schema_migrations.
type migration = migrations.Migration

// loadMigrations returns the embedded migrations in order.
func loadMigrations() ([]migration, error) {
	return migrations.Load(migrationFiles, "migrations")
}

// migrate brings the database up to the newest migration, each missing one in its
// own transaction, and refuses a database that is ahead of ms.
func migrate(ctx context.Context, db *sql.DB, ms []migration) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var current int64
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if known := int64(len(ms)); current > known {
		return fmt.Errorf("%w: the database is at version %d, this agentd knows up to %d", ErrNewerSchema, current, known)
	}
	for _, m := range ms[current:] {
		if err := apply(ctx, db, m); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return nil
}

func apply(ctx context.Context, db *sql.DB, m migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Another process opening the same file may have applied it between our read of
	// the version and this transaction, which the write lock now excludes.
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		m.Version, time.Now().UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}
