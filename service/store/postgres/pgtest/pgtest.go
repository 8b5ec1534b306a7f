// Package pgtest gives tests a PostgreSQL store of their own: a fresh schema in the
// test database, dropped when the test ends.
//
// The database is the one at AGENTD_TEST_POSTGRES, by default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. When it cannot be reached
// the test is skipped, loudly, unless the environment variable CI is "true": then it
// fails, so that CI never passes by skipping.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/service/store/postgres"
)

// DefaultDSN is the test database when AGENTD_TEST_POSTGRES is not set.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// reach remembers whether the database answered, so that a process whose tests cannot
// reach it waits for the connect timeout once, not once per test.
var reach struct {
	once sync.Once
	err  error
}

// reachable returns the test database's DSN, or skips t (fails it under CI) when the
// database cannot be reached.
func reachable(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("AGENTD_TEST_POSTGRES")
	if dsn == "" {
		dsn = DefaultDSN
	}
	reach.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		reach.err = err
	})
	if reach.err != nil {
		msg := "PostgreSQL at " + redact(dsn) + " cannot be reached: " + reach.err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("\n*** THE POSTGRESQL TESTS WERE SKIPPED ***\n" + msg + "\n" +
			"Start PostgreSQL 15 or later on 127.0.0.1:5432 with trust authentication and a database named test, e.g.\n" +
			"\tdocker run -d --name agentd-pg -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust -e POSTGRES_DB=test postgres:15\n" +
			"or point AGENTD_TEST_POSTGRES at one (a postgres:// URL). With CI=true this is a failure.")
	}
	return dsn
}

// NewSchema returns the test database's DSN and the name of a schema that does not
// exist yet, which it drops (with all it holds) when t ends: for tests that let Open
// create the schema, as WithSchema does.
func NewSchema(t testing.TB) (dsn, schema string) {
	t.Helper()
	dsn = reachable(t)
	var b [8]byte
	rand.Read(b[:])
	schema = "agentd_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return dsn, schema
}

// DSN creates a fresh schema and returns a DSN whose connections use it (its
// search_path names it), for tests that configure a store as a user would, by a
// string. The schema is dropped when t ends.
func DSN(t testing.TB) string {
	t.Helper()
	dsn, schema := NewSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return withSearchPath(t, dsn, schema)
}

// withSearchPath adds search_path to dsn, which pgx sends as a run-time parameter
// whether dsn is a URL or key=value pairs.
func withSearchPath(t testing.TB, dsn, schema string) string {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " search_path=" + schema
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("AGENTD_TEST_POSTGRES: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Open returns a store in a fresh schema, closed and dropped when t ends.
func Open(t testing.TB) *postgres.Store {
	t.Helper()
	dsn, schema := NewSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := postgres.Open(ctx, dsn, postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// redact hides the password of dsn, which a skip message must not print.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return u.Redacted()
	}
	return "the DSN in AGENTD_TEST_POSTGRES"
}
