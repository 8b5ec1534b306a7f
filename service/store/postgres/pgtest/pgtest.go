// Package pgtest gives tests a PostgreSQL store of their own: a fresh schema in the
// test database, dropped when the test ends.
//
// The database is the one at AGENTD_TEST_POSTGRES, by default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. When it cannot be reached
// the test is skipped, and [Main] fails the test binary once its tests have run, with
// one message that says why and what to do: go test shows a passing package's output
// only with -v, so a skip alone would read "ok". AGENTD_TEST_POSTGRES=skip skips
// these tests on purpose, and the package passes. When the environment variable CI is
// "true" the tests fail instead, skip or not, so that CI never passes by skipping.
//
// Every package whose tests use pgtest runs them through [Main]:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/service/store/postgres"
)

// DefaultDSN is the test database when AGENTD_TEST_POSTGRES is not set.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// skipAll is the value of AGENTD_TEST_POSTGRES that skips the tests on purpose.
const skipAll = "skip"

// reach remembers whether the database answered, so that a process whose tests cannot
// reach it waits for the connect timeout once, not once per test.
var reach struct {
	once sync.Once
	err  error
}

// The test binary's state: whether its TestMain runs the tests through [Main], and how
// many tests could not reach the database.
var (
	inMain    atomic.Bool
	unreached atomic.Int64
)

// reachable returns the test database's DSN, or skips t (fails it under CI) when the
// database cannot be reached or AGENTD_TEST_POSTGRES is "skip".
func reachable(t testing.TB) string {
	t.Helper()
	if !inMain.Load() {
		t.Fatal("pgtest: run this package's tests through pgtest.Main, so that a skip is seen without -v:\n" +
			"\tfunc TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }")
	}
	dsn := os.Getenv("AGENTD_TEST_POSTGRES")
	if dsn == skipAll {
		if ci() {
			t.Fatal("AGENTD_TEST_POSTGRES=skip, but CI=true: CI never passes by skipping the PostgreSQL tests")
		}
		t.Skip("AGENTD_TEST_POSTGRES=skip: the PostgreSQL tests are skipped on purpose")
	}
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
		if err != nil {
			err = fmt.Errorf("PostgreSQL at %s cannot be reached: %w", redact(dsn), err)
		}
		reach.err = err
	})
	if reach.err != nil {
		unreached.Add(1)
		if ci() {
			t.Fatal(reach.err)
		}
		t.Skip(reach.err)
	}
	return dsn
}

func ci() bool { return os.Getenv("CI") == "true" }

// TestingM is what [Main] wraps: a *testing.M, or another wrapper's TestingM, such as
// go.uber.org/goleak's.
type TestingM interface {
	Run() int
}

// Main returns m with a Run that, once m's tests have run, fails if any of them could not
// reach the database, and then writes one message to stderr: which database, why, how
// many tests, and how to start one or skip them on purpose. The failure is what makes
// the message seen, as go test drops a passing package's output unless -v is given.
// A TestMain whose tests use pgtest runs them through it, inside any leak check:
//
//	goleak.VerifyTestMain(pgtest.Main(m))
func Main(m TestingM) TestingM { return mainM{m} }

type mainM struct{ m TestingM }

func (w mainM) Run() int {
	inMain.Store(true)
	code := w.m.Run()
	if n := unreached.Load(); n > 0 {
		what := fmt.Sprintf("%d TESTS SKIPPED, SO THE PACKAGE FAILS", n)
		if ci() {
			what = fmt.Sprintf("%d TESTS FAILED", n)
		}
		fmt.Fprintf(os.Stderr, "\n*** POSTGRESQL: %s ***\n%v\n"+
			"Start PostgreSQL 15 or later on 127.0.0.1:5432 with trust authentication and a database named test, e.g.\n"+
			"\tdocker run -d --name agentd-pg -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust -e POSTGRES_DB=test postgres:15\n"+
			"or point AGENTD_TEST_POSTGRES at one (a postgres:// URL), or set AGENTD_TEST_POSTGRES=skip to skip these tests on purpose (refused with CI=true).\n\n",
			what, reach.err)
		if code == 0 {
			code = 1
		}
	}
	return code
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
