package postgres

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/service/store"
)

// Leases are timed by the database's clock, now(): the start of the statement's
// transaction, which every replica reads alike.

// claimSQL takes the run, and notifies it, in one statement. Of claims that race, the
// first to update the row wins; the others wait for its lock, then find the row's
// new holder and lease, which fail their condition.
var claimSQL = `WITH r AS (
	UPDATE runs SET holder = $2, epoch = epoch + 1, lease_until = now() + $3::interval
	WHERE id = $1 AND status <> 3 AND (holder = '' OR lease_until < now() OR holder = $2 OR $4)
	RETURNING ` + runColumns + `
)
SELECT ` + runFields + ` FROM r WHERE pg_notify($5, id) IS NOT NULL`

// Claim is one round trip when it succeeds, and a second to tell why when it fails.
func (s *Store) Claim(ctx context.Context, id, holder string, lease time.Duration, force bool) (store.Run, error) {
	if holder == "" {
		return store.Run{}, errNoHolder
	}
	r, err := scanRun(s.pool.QueryRow(ctx, claimSQL, id, holder, lease, force, s.channel))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Run{}, notHeld(ctx, s.pool, id, store.ErrHeld)
	case err != nil:
		return store.Run{}, fail(ctx, "claim run", err)
	}
	return r, nil
}

// renewSQL extends the leases $1, $2, $3 (run ids, holders, epochs) that still hold
// their runs. It locks the runs in the order of their ids, as AppendEvents does, so
// that the two cannot deadlock on runs they share.
const renewSQL = `WITH held AS MATERIALIZED (
	SELECT r.id FROM runs r
	JOIN unnest($1::text[], $2::text[], $3::bigint[]) AS l(id, holder, epoch)
		ON r.id = l.id AND r.holder = l.holder AND r.epoch = l.epoch
	WHERE r.holder <> '' AND r.status <> 3
	ORDER BY r.id
	FOR UPDATE OF r
)
UPDATE runs SET lease_until = now() + $4::interval FROM held WHERE runs.id = held.id RETURNING runs.id`

// Renew is one statement. It notifies nothing: a lease going on is no change.
func (s *Store) Renew(ctx context.Context, held []store.Lease, lease time.Duration) ([]string, error) {
	if len(held) == 0 {
		return nil, ctx.Err()
	}
	ids, holders, epochs := make([]string, len(held)), make([]string, len(held)), make([]int64, len(held))
	for i, l := range held {
		ids[i], holders[i], epochs[i] = l.RunID, l.Holder, l.Epoch
	}
	rows, err := s.pool.Query(ctx, renewSQL, ids, holders, epochs, lease)
	if err != nil {
		return nil, fail(ctx, "renew leases", err)
	}
	renewed := map[string]bool{}
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { renewed[id] = true; return nil }); err != nil {
		return nil, fail(ctx, "renew leases", err)
	}
	var lost []string
	for _, id := range ids {
		if !renewed[id] {
			lost = append(lost, id)
		}
	}
	return lost, nil
}

// heartbeatSQL records replica $1 (started $2, draining $3) as seen now, forgets the
// replicas not seen for an hour, and returns those seen within $4, the replica itself
// among them (the statement's snapshot does not see its own upsert).
const heartbeatSQL = `WITH up AS (
	INSERT INTO replicas (id, started_at, seen_at, draining) VALUES ($1, $2, now(), $3)
	ON CONFLICT (id) DO UPDATE SET started_at = $2, seen_at = now(), draining = $3
), gone AS (
	DELETE FROM replicas WHERE seen_at < now() - interval '1 hour' AND id <> $1
)
SELECT id, started_at, draining FROM replicas WHERE seen_at >= now() - $4::interval AND id <> $1
UNION ALL SELECT $1, $2, $3
ORDER BY 2, 1`

// Heartbeat is one statement.
func (s *Store) Heartbeat(ctx context.Context, r store.Replica, alive time.Duration) ([]store.Replica, error) {
	rows, err := s.pool.Query(ctx, heartbeatSQL, r.ID, r.StartedAt, r.Draining, alive)
	return collect(ctx, "heartbeat", rows, err, func(row pgx.Row) (store.Replica, error) {
		var rp store.Replica
		err := row.Scan(&rp.ID, &rp.StartedAt, &rp.Draining)
		return rp, err
	})
}

// claimNextSQL claims up to $1 of the runs that claimableSQL finds (among four times
// as many, so that the runs other claims are taking do not leave it short), and
// notifies them once. FOR UPDATE SKIP LOCKED passes over a run another claim has
// locked, rather than wait for it and then find it held: replicas that claim at once
// take different runs. A run is locked only where it is still claimable.
var claimNextSQL = `WITH c AS (
	SELECT id AS cid, lease_until AS was FROM runs
	WHERE id IN (SELECT id FROM (` + strings.ReplaceAll(strings.ReplaceAll(claimableIDs, "$1", "$6"), "wake_at <= now()", "wake_at <= now() - $7::interval") + `) x)
		AND status <> 3 AND (holder = '' OR lease_until < now())
	ORDER BY lease_until, id LIMIT $1
	FOR UPDATE SKIP LOCKED
), r AS (
	UPDATE runs SET holder = $2, epoch = epoch + 1, lease_until = now() + $3::interval
	FROM c WHERE id = c.cid
	RETURNING ` + runColumns + `, c.was
), n AS (
	SELECT pg_notify($4, CASE WHEN length(p) <= $5 THEN p ELSE '' END) FROM (SELECT string_agg(id, ',') AS p FROM r) x WHERE p IS NOT NULL
)
SELECT ` + runFields + ` FROM r LEFT JOIN (SELECT count(*) FROM n) AS notified ON true ORDER BY was, id`

// ClaimNext is one statement.
func (s *Store) ClaimNext(ctx context.Context, holder string, lease time.Duration, limit int, wakeAfter time.Duration) ([]store.Run, error) {
	if holder == "" {
		return nil, errNoHolder
	}
	limit = max(limit, 0)
	rows, err := s.pool.Query(ctx, claimNextSQL, limit, holder, lease, s.channel, maxPayload, 4*limit, max(wakeAfter, 0))
	return collect(ctx, "claim runs", rows, err, scanRun)
}

// claimableSQL finds up to $1 runs that need a holder in the three partial indexes
// that hold them, each read in the order wanted and no further than $1 rows. A run
// held by none has a lease_until in the past, so lease_until <= now() bounds the
// range of runs_running_lease. The runs come longest waiting first: by when their
// lease ended, and a run due to wake has waited no less since it was due.
var claimableSQL = `WITH c AS (` + claimableIDs + `)
SELECT ` + runColumns + ` FROM runs JOIN c USING (id) ORDER BY lease_until, id LIMIT $1`

// claimableIDs is the ids of claimableSQL: up to $1 of each kind (claimNextSQL asks
// for four times as many).
const claimableIDs = `(SELECT id FROM runs
		WHERE status = 1 AND lease_until <= now() AND (holder = '' OR lease_until < now())
		ORDER BY lease_until LIMIT $1)
	UNION
	(SELECT id FROM runs
		WHERE status = 2 AND wake_at <= now() AND (holder = '' OR lease_until < now())
		ORDER BY wake_at LIMIT $1)
	UNION
	(SELECT r.id FROM runs r
		WHERE r.status = 2 AND (r.holder = '' OR r.lease_until < now())
			AND r.id IN (SELECT run_id FROM inputs WHERE answer IS NULL)
		ORDER BY r.lease_until LIMIT $1)`

func (s *Store) Claimable(ctx context.Context, limit int) ([]store.Run, error) {
	rows, err := s.pool.Query(ctx, claimableSQL, max(limit, 0))
	return collect(ctx, "claimable runs", rows, err, scanRun)
}
