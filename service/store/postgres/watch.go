package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Every transaction that changes runs (appends their events, puts or answers an
// input, updates, claims or releases them) sends one notification on the store's
// channel as it commits, whose payload lists the runs' ids, comma-separated: a
// transaction that rolls back sends none, and a replica that hears one reads what the
// transaction wrote.

// maxPayload bounds a notification's payload, under PostgreSQL's 8000 bytes: a longer
// list of ids goes as the empty payload, which says any run may have changed.
const maxPayload = 7000

// channelFor returns the channel of the store in schema. It names the schema, so that
// stores on two schemas of one database do not wake each other; a name too long for
// an identifier (63 bytes) is hashed.
func channelFor(schema string) string {
	const prefix = "agentd_runs."
	if len(prefix)+len(schema) <= 63 {
		return prefix + schema
	}
	sum := sha256.Sum256([]byte(schema))
	return prefix + hex.EncodeToString(sum[:16])
}

// The Watch of a store listens again after a lost connection, waiting between tries
// from minRetry up to maxRetry.
const (
	minRetry = 100 * time.Millisecond
	maxRetry = 5 * time.Second
)

// Watch implements [store.Store]. Each Watch listens on a connection of its own, not
// one of the pool's, from a goroutine that ends when ctx does or when the store
// closes. It calls f(nil) each time it starts listening, the first time included:
// what changed before, or while it was not listening, it cannot tell.
func (s *Store) Watch(ctx context.Context, f func(ids []string)) {
	if s.closing.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.closing, cancel)
	s.watchers.Go(func() {
		defer cancel()
		defer stop()
		s.listenLoop(ctx, f)
	})
}

// listenLoop listens until ctx ends, connecting again whenever the connection is lost.
func (s *Store) listenLoop(ctx context.Context, f func(ids []string)) {
	retry := minRetry
	for {
		if s.listenOnce(ctx, f) {
			retry = minRetry
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		retry = min(2*retry, maxRetry)
	}
}

// listenOnce connects and listens until the connection fails or ctx ends, calling f
// with what it hears. It reports whether it got to listen.
func (s *Store) listenOnce(ctx context.Context, f func(ids []string)) bool {
	conn, err := pgx.ConnectConfig(ctx, s.listen)
	if err != nil {
		return false
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return false
	}
	if ctx.Err() != nil {
		return true
	}
	f(nil)
	for {
		n, err := conn.WaitForNotification(ctx)
		// No call once ctx has ended: a notification read since is not reported.
		if err != nil || ctx.Err() != nil {
			return true
		}
		var ids []string
		if n.Payload != "" {
			ids = strings.Split(n.Payload, ",")
		}
		f(ids)
	}
}
