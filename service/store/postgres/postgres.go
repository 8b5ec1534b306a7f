package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentd/agentd/service/store"
)

// The SQLSTATE codes the store tells apart.
const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
)

// finished is store.Finished as the status column holds it. The SQL spells it as the
// literal 3, as the partial indexes' predicates do, so that the planner matches them.
const finished = int16(store.Finished)

// Store is a store.Store in PostgreSQL. It is safe for concurrent use, and so are the
// Stores of several processes on one database.
type Store struct {
	pool *pgxpool.Pool
	// channel is where the store's writes notify the runs they change, and listen is
	// how a Watch connects to hear them: outside the pool, whose connections come and go.
	channel string
	listen  *pgx.ConnConfig
	// closing ends when Close is called, and with it the Watches, which watchers waits
	// for.
	closing  context.Context
	close    context.CancelFunc
	watchers sync.WaitGroup
}

var _ store.Store = (*Store)(nil)

type options struct {
	schema string
}

// Option configures [Open].
type Option func(*options)

// WithSchema keeps every table of the store in schema name, which Open creates if it
// is missing: the pool sets search_path to it on every connection. Without it the
// tables live where the connection's search_path puts them (public, by default).
func WithSchema(name string) Option {
	return func(o *options) { o.schema = name }
}

// Open connects to the database at dsn, a postgres:// URL or a key=value string as
// pgx reads them (pool settings such as pool_max_conns included), and migrates its
// schema. The database must not be ahead of this agentd ([ErrNewerSchema]).
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	ms, err := loadMigrations()
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if o.schema != "" {
		// A runtime parameter goes in the startup message: no round trip per
		// connection, and no connection that could run a query before it is set.
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{o.schema}.Sanitize()
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := migrate(ctx, pool, o.schema, ms); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	// The tables are in the first schema of the search_path that exists, wherever
	// the search_path came from: that schema names the channel.
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, fail(ctx, "current schema", err)
	}
	s := &Store{pool: pool, channel: channelFor(schema), listen: cfg.ConnConfig.Copy()}
	s.closing, s.close = context.WithCancel(context.Background())
	return s, nil
}

// Close stops the Watches, waiting for their listeners to end, and closes the pool,
// waiting for the connections in use to be released.
func (s *Store) Close() error {
	s.close()
	s.watchers.Wait()
	s.pool.Close()
	return nil
}

// fail wraps err, from operation op, so that errors.Is finds the context's error when
// the context ended first, whatever pgx made of the interrupted exchange.
func fail(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("postgres: %s: %w: %w", op, cerr, err)
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// pgCode returns err's SQLSTATE and constraint, if the server sent err.
func pgCode(err error) (code, constraint string) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code, pgErr.ConstraintName
	}
	return "", ""
}

// collect reads with scan the rows of a query that returned err, and closes them.
func collect[T any](ctx context.Context, op string, rows pgx.Rows, err error, scan func(pgx.Row) (T, error)) ([]T, error) {
	if err != nil {
		return nil, fail(ctx, op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
	if err != nil {
		return nil, fail(ctx, op, err)
	}
	return out, nil
}

// querier is what a pool and a transaction have in common that the store uses.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
