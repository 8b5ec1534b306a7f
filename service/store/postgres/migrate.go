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

// ErrNoSchema is Open's error for a connection whose search_path names no schema that
// the store's tables can go in: none that exists, or none the role may use. The error
// names the schema and the statement that would fix it.
var ErrNoSchema = errors.New("no schema to keep the tables in")

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

// checkSearchPath refuses a connection whose search_path names no schema it can create
// tables in (a search_path in the store's URL with a typo, say): PostgreSQL's own error,
// "no schema has been selected to create in" (SQLSTATE 3F000), names neither the schema
// nor the fix. The schema is not created here: a misspelt name would quietly start an
// empty store beside the real one, and the role may not be allowed to create schemas.
func checkSearchPath(ctx context.Context, tx pgx.Tx) error {
	var current *string
	if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&current); err != nil {
		return fmt.Errorf("read the current schema: %w", err)
	}
	if current != nil {
		return nil
	}
	var path, role string
	if err := tx.QueryRow(ctx, `SELECT current_setting('search_path'), current_user`).Scan(&path, &role); err != nil {
		return fmt.Errorf("read search_path: %w", err)
	}
	var first searchPathEntry
	for _, e := range splitSearchPath(path) {
		// "$user" stands for a schema named after the role, if there is one: not a
		// name to suggest creating.
		if e.name != "$user" {
			first = e
			break
		}
	}
	if first.name == "" {
		what := "the search_path is empty"
		if strings.Trim(path, `" `) != "" {
			what = fmt.Sprintf("the search_path (%s) names no schema but the role's own, and role %s has none", path, role)
		}
		return fmt.Errorf("%w: %s: name a schema in the store URL (search_path=public, say)", ErrNoSchema, what)
	}
	var exists, usable bool
	if err := tx.QueryRow(ctx, `SELECT true, has_schema_privilege(oid, 'USAGE') FROM pg_namespace WHERE nspname = $1`, first.name).Scan(&exists, &usable); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("look up schema %s: %w", first.text, err)
	}
	if exists && !usable {
		return fmt.Errorf("%w: schema %s, which the search_path (%s) names, exists, but role %s may not use it: grant it (GRANT USAGE, CREATE ON SCHEMA %s TO %s;), or name another schema in search_path", ErrNoSchema, first.text, path, role, first.text, pgx.Identifier{role}.Sanitize())
	}
	return fmt.Errorf("%w: schema %s, which the search_path (%s) names, does not exist in this database: create it (CREATE SCHEMA %s;), or name a schema that exists in search_path", ErrNoSchema, first.text, path, first.text)
}

// searchPathEntry is one schema of a search_path: as the setting spells it (quoted if
// it must be) and as the catalog names it.
type searchPathEntry struct{ text, name string }

// splitSearchPath splits a search_path as current_setting returns it: names separated
// by commas, each quoted with double quotes (a doubled quote inside for a quote) if it
// needs to be. An unquoted name is folded to lower case, as PostgreSQL folds it.
func splitSearchPath(path string) []searchPathEntry {
	var out []searchPathEntry
	for rest := strings.TrimSpace(path); rest != ""; {
		var e searchPathEntry
		if rest[0] == '"' {
			var name strings.Builder
			i := 1
			for i < len(rest) {
				if rest[i] == '"' {
					if i+1 < len(rest) && rest[i+1] == '"' {
						name.WriteByte('"')
						i += 2
						continue
					}
					i++
					break
				}
				name.WriteByte(rest[i])
				i++
			}
			e = searchPathEntry{text: rest[:i], name: name.String()}
			rest = rest[i:]
		} else {
			end := strings.IndexByte(rest, ',')
			if end < 0 {
				end = len(rest)
			}
			text := strings.TrimSpace(rest[:end])
			e = searchPathEntry{text: text, name: strings.ToLower(text)}
			rest = rest[end:]
		}
		if e.name != "" {
			out = append(out, e)
		}
		rest = strings.TrimSpace(rest)
		rest = strings.TrimPrefix(rest, ",")
		rest = strings.TrimSpace(rest)
	}
	return out
}
