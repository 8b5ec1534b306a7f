package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/internal/watch"
)

// readers is how many read-only connections a Store keeps: reads are short, and a
// few let a reattaching stream's replay run beside the thread and run lookups of
// other requests.
const readers = 4

// busyTimeout is how long a connection waits for a lock another one holds. Within one
// process writes never wait for each other; this covers another process opening the
// same file (a second agentd started by mistake, the sqlite3 shell) and the brief
// locks of a WAL checkpoint.
const busyTimeout = 10 * time.Second

// Store is a [store.Store] on a SQLite file. It is safe for concurrent use. Its leases
// are timed by the process's clock, and its Watch hears of the changes made through it
// alone: one process uses the file.
type Store struct {
	w   *sql.DB // the one writer connection
	r   *sql.DB // the read-only pool
	hub *watch.Hub
}

var _ store.Store = (*Store)(nil)

// Open opens the database at path, creating the file if it does not exist, and
// applies the migrations it lacks. A database migrated by a newer agentd gets
// [ErrNewerSchema].
func Open(ctx context.Context, path string) (*Store, error) {
	ms, err := loadMigrations()
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	busy := fmt.Sprint(busyTimeout.Milliseconds())

	// A file: URI lets SQLite read mode=ro; the driver reads the underscore keys.
	// Immediate transactions take the write lock at BEGIN, so a transaction never
	// fails part-way when upgrading from a read lock another process holds.
	w, err := sql.Open("sqlite", fileURI(abs, url.Values{
		"_busy_timeout": {busy},
		"_foreign_keys": {"1"},
		"_journal_mode": {"WAL"},
		"_synchronous":  {"NORMAL"},
		"_txlock":       {"immediate"},
	}))
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	s := &Store{w: w, hub: watch.NewHub()}
	if err := s.init(ctx, abs, busy, ms); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return s, nil
}

func (s *Store) init(ctx context.Context, abs, busy string, ms []migration) error {
	// Readers wait for no writer only in WAL mode; a file system where SQLite cannot
	// use it (no shared memory) is better refused than served with stalls.
	var mode string
	if err := s.w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %s, not wal", mode)
	}
	if err := migrate(ctx, s.w, ms); err != nil {
		return err
	}
	// The readers open the file only once the writer has made it a WAL database with
	// the current schema: a read-only connection can do neither.
	r, err := sql.Open("sqlite", fileURI(abs, url.Values{
		"mode":          {"ro"},
		"_busy_timeout": {busy},
	}))
	if err != nil {
		return err
	}
	r.SetMaxOpenConns(readers)
	r.SetMaxIdleConns(readers)
	s.r = r
	return r.PingContext(ctx)
}

func fileURI(abs string, q url.Values) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive letter
	}
	u := url.URL{Scheme: "file", Path: p, RawQuery: q.Encode()}
	return u.String()
}

// Close stops the watchers and closes the database. The readers close first, so that
// the writer's connection is the last and checkpoints the WAL into the file.
func (s *Store) Close() error {
	s.hub.Close()
	var errs []error
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	return errors.Join(errs...)
}

// write runs fn in a transaction on the writer connection and commits it unless fn
// fails.
func (s *Store) write(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return wrap(ctx, op, err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return wrap(ctx, op, err)
	}
	return wrap(ctx, op, tx.Commit())
}

// change is write for a change to the runs ids, which the watchers hear of once it is
// committed.
func (s *Store) change(ctx context.Context, op string, ids []string, fn func(*sql.Tx) error) error {
	if err := s.write(ctx, op, fn); err != nil {
		return err
	}
	s.hub.Notify(ids...)
	return nil
}

// Watch implements [store.Store]: f hears of the changes made through s.
func (s *Store) Watch(ctx context.Context, f func(ids []string)) { s.hub.Watch(ctx, f) }

// changed returns how many rows a statement changed, given what it returned.
func changed(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// read runs fn in a read transaction, so that what it reads in several statements is
// one snapshot.
func (s *Store) read(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return wrap(ctx, op, err)
	}
	defer tx.Rollback()
	return wrap(ctx, op, fn(tx))
}

// wrap names the operation in a database error. The store's own errors pass as
// they are, and an error caused by ctx ending says so, whatever the driver made of
// the interruption.
func wrap(ctx context.Context, op string, err error) error {
	if err == nil || isStoreError(err) {
		return err
	}
	if ce := ctx.Err(); ce != nil && !errors.Is(err, ce) {
		return fmt.Errorf("sqlite: %s: %w (%v)", op, ce, err)
	}
	return fmt.Errorf("sqlite: %s: %w", op, err)
}

func isStoreError(err error) bool {
	for _, target := range []error{store.ErrNotFound, store.ErrExists, store.ErrSeq, store.ErrExpired, store.ErrFinished,
		store.ErrFenced, store.ErrHeld} {
		if errors.Is(err, target) {
			return true
		}
	}
	_, busy := errors.AsType[*store.ThreadBusyError](err)
	return busy
}

// isUniqueViolation reports whether err is a primary key or unique index conflict.
func isUniqueViolation(err error) bool {
	e, ok := errors.AsType[*sqlite.Error](err)
	if !ok {
		return false
	}
	switch e.Code() {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return true
	}
	return false
}

// isForeignKeyViolation reports whether err is a reference to a row that does not
// exist.
func isForeignKeyViolation(err error) bool {
	e, ok := errors.AsType[*sqlite.Error](err)
	return ok && e.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// Times are kept as unix nanoseconds. Those beyond what an int64 holds (years before
// 1678 or after 2262, the zero Time among them) are clamped, so that comparisons
// with them keep their sense.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

func nanos(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return math.MinInt64
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// blob scans a BLOB column read together with its IS NULL: the driver reads NULL and
// an empty blob both as nil, and a nil Checkpoint or Answer means something an empty
// one does not.
type blob struct {
	b    []byte
	null bool
}

func (b *blob) bytes() []byte {
	switch {
	case b.null:
		return nil
	case b.b == nil:
		return []byte{}
	}
	return b.b
}
