//go:build unix

package main

import (
	"context"
	"io"
	"net"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/service/store/postgres/pgtest"
)

// The store outage test's settings.
const (
	outageRuns     = 150
	outageInflight = 50
	// outageAfter is how long the load runs before the database goes away, and
	// outageFor how long it stays away.
	outageAfter = 3 * time.Second
	outageFor   = 10 * time.Second
	// outageQuiet bounds how long a client may go without a word from the fleet
	// (an event, a heartbeat, or a status it can act on).
	outageQuiet = 15 * time.Second
)

// TestFleetStoreOutage runs the chaos test's load (runs that ask an approval, decided
// with SendRunInput on a replica at random, followed on streams that break and attach
// again anywhere) on three replicas that reach PostgreSQL through a proxy, and cuts the
// proxy for 10 s mid-load: every connection closed, every new one refused. Every client
// must hear from the fleet (an event, a heartbeat, or a status it can act on) at least
// every 15 s, and every run must complete once, as TestFleetChaos checks them.
func TestFleetStoreOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: builds and starts agentd; skipped with -short")
	}
	w := newFleetWorld(t, &fleetModel{delay: chaosDelta})
	if !w.known {
		t.Skip("agentd has no fleet flags")
	}
	runs := envInt(t, "AGENTD_OUTAGE_RUNS", outageRuns)
	proxy := newPGProxy(t, pgtest.DSN(t))
	fl := newFleet(t, w, "outage", proxy.dsn, chaosReplicas)
	fol := &follower{fl: fl, agent: "ledger", approve: true}

	ctx, cancel := context.WithTimeout(t.Context(), chaosDeadline)
	defer cancel()
	began := time.Now()
	cut := time.AfterFunc(outageAfter, func() { proxy.cut(outageFor) })
	defer cut.Stop()
	all := fol.runAll(ctx, runs, outageInflight, chaosRunTimeout)
	elapsed := time.Since(began)

	stats := checkFleetRuns(t, fl, w, all, runs)
	var quiet []time.Duration
	for _, fr := range all {
		if fr == nil {
			continue
		}
		quiet = append(quiet, fr.quiet)
		if fr.quiet > outageQuiet {
			t.Errorf("task %d, run %s: the client heard nothing from the fleet for %s, want at most %s", fr.task, fr.runID, fr.quiet.Round(time.Millisecond), outageQuiet)
		}
	}
	t.Logf("%d runs on %d replicas (%d at a time), the database cut for %s after %s: %d completed in %s; the longest a client heard nothing: p50 %s, p99 %s, max %s",
		runs, chaosReplicas, outageInflight, outageFor, outageAfter, stats.completed, elapsed.Round(time.Millisecond),
		percentile(quiet, 50).Round(time.Millisecond), percentile(quiet, 99).Round(time.Millisecond), percentile(quiet, 100).Round(time.Millisecond))
	t.Logf("%d reattachments in all; a Run start tried again for %d runs; %d decisions refused WAKE_FAILED and sent again; ledger_write: %d executions, %d outcomes unknown to the model",
		stats.reattached, stats.restarted, stats.wakeFailed, stats.writes, stats.unknown)
}

// pgProxy forwards TCP connections to a PostgreSQL server, and can cut them: a database
// that goes away (a restart, a failover, a network partition) for the replicas that
// reach it through the proxy, and for nothing else on the machine.
type pgProxy struct {
	dsn    string // the DSN, through the proxy
	target string
	ln     net.Listener

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	down  time.Time // new connections are refused until then
}

// newPGProxy proxies the database of dsn, a postgres:// URL, until t ends.
func newPGProxy(t *testing.T, dsn string) *pgProxy {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{target: u.Host, ln: ln, conns: map[net.Conn]struct{}{}}
	u.Host = ln.Addr().String()
	p.dsn = u.String()
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			refused := time.Now().Before(p.down)
			p.mu.Unlock()
			if refused {
				c.Close()
				continue
			}
			wg.Go(func() { p.pipe(c) })
		}
	})
	return p
}

// pipe forwards one client connection until either side ends or the proxy cuts it.
func (p *pgProxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	copyClose := func(dst, src net.Conn) {
		io.Copy(dst, src) // until a side goes away, or is cut: both end then
		dst.Close()
		src.Close()
	}
	wg.Go(func() { copyClose(up, c) })
	wg.Go(func() { copyClose(c, up) })
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// cut closes every connection and refuses new ones for d.
func (p *pgProxy) cut(d time.Duration) {
	p.mu.Lock()
	p.down = time.Now().Add(d)
	p.mu.Unlock()
	p.closeAll()
}

func (p *pgProxy) closeAll() {
	p.mu.Lock()
	conns := slices.Collect(func(yield func(net.Conn) bool) {
		for c := range p.conns {
			if !yield(c) {
				return
			}
		}
	})
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
