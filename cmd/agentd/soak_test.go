//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/agentdtest"
)

// TestSoakShort is a soak: the real agentd on workload:medium with no rate limit, kept
// busy by `agentctl load` for $AGENTD_SOAK (a duration such as 10m) with
// $AGENTD_SOAK_CONCURRENCY streams (default 1000). No run may fail, and agentd's RSS near
// the end must be within 1.5× of its RSS a quarter of the way in: memory stays flat under
// a steady load. The deltas of a client behind must merge (fewer events than deltas).
// RSS is read from /proc, so the soak runs on Linux only. It is skipped
// unless AGENTD_SOAK is set:
//
//	AGENTD_SOAK=10m go test -run TestSoakShort -timeout 15m ./cmd/agentd/
func TestSoakShort(t *testing.T) {
	soak := os.Getenv("AGENTD_SOAK")
	if soak == "" {
		t.Skip("soak test: set AGENTD_SOAK to a duration (AGENTD_SOAK=10m go test -run TestSoakShort -timeout 15m ./cmd/agentd/)")
	}
	duration, err := time.ParseDuration(soak)
	if err != nil || duration <= 0 {
		t.Fatalf("AGENTD_SOAK=%q: want a positive duration such as 10m", soak)
	}
	concurrency := 1000
	if s := os.Getenv("AGENTD_SOAK_CONCURRENCY"); s != "" {
		if concurrency, err = strconv.Atoi(s); err != nil || concurrency < 1 {
			t.Fatalf("AGENTD_SOAK_CONCURRENCY=%q: want a positive number", s)
		}
	}

	ctl := agentdtest.Build(t, "../agentctl")
	agentd := startAgentd(t, []string{
		"--model", "workload:medium",
		"--rate-limit", "0",
		"--max-runs", strconv.Itoa(max(1024, 2*concurrency)),
		"--log-level", "warn",
	})
	// agentdLog is the end of agentd's log: a soak's may be long.
	agentdLog := func() string {
		log := agentd.Log()
		if len(log) > 20000 {
			log = "…" + log[len(log)-20000:]
		}
		return log
	}
	pid := agentd.Pid()
	// Read now, so that a system without /proc fails here and not after the soak.
	idleKiB := rssKiB(t, pid)

	ctx, cancel := context.WithTimeout(t.Context(), duration+2*time.Minute)
	defer cancel()
	// --server-pid adds agentd's RSS (start, peak, final) to the summary, which is logged.
	load := exec.CommandContext(ctx, ctl, "--addr", agentd.Addr, "--plaintext", "load",
		"--concurrency", strconv.Itoa(concurrency), "--duration", duration.String(),
		"--server-pid", strconv.Itoa(pid), "--json")
	load.Env = agentdtest.EnvironWithout("AGENTD_", "AGENTCTL_")
	var stdout, stderr bytes.Buffer
	load.Stdout, load.Stderr = &stdout, &stderr
	started := time.Now()
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	loaded := make(chan error, 1)
	go func() { loaded <- load.Wait() }()

	// agentd's RSS a quarter of the way in, and near the end (the load still on).
	var quarterKiB, lateKiB int64
	for _, at := range []struct {
		frac float64
		kib  *int64
	}{{0.25, &quarterKiB}, {0.95, &lateKiB}} {
		select {
		case err := <-loaded:
			t.Fatalf("agentctl load ended early: %v\n%s%s\n--- agentd log:\n%s", err, stdout.String(), stderr.String(), agentdLog())
		case <-time.After(time.Until(started.Add(time.Duration(at.frac * float64(duration))))):
			*at.kib = rssKiB(t, pid)
		}
	}
	if err := <-loaded; err != nil {
		t.Fatalf("agentctl load: %v\n%s%s\n--- agentd log:\n%s", err, stdout.String(), stderr.String(), agentdLog())
	}

	// What is checked; the rest of the summary (rates, latencies, agentd's RSS) is logged.
	var sum struct {
		Runs        int            `json:"runs"`
		Failed      int            `json:"failed"`
		Errors      map[string]int `json:"errors"`
		Deltas      int64          `json:"deltas"`
		CutDeltas   int64          `json:"cut_deltas"`
		DeltaEvents int64          `json:"delta_events"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("agentctl load --json: %v\n%s", err, stdout.String())
	}
	t.Logf("soak %s at concurrency %d: %s", duration, concurrency, strings.TrimSpace(stdout.String()))
	t.Logf("agentd RSS: idle %d KiB, at 25%% %d KiB, at 95%% %d KiB", idleKiB, quarterKiB, lateKiB)
	if sum.Runs == 0 || sum.Failed != 0 || len(sum.Errors) != 0 {
		t.Errorf("%d runs completed, %d failed, errors %v: want runs and no failures", sum.Runs, sum.Failed, sum.Errors)
	}
	// The workload replays at full speed, faster than any client reads: the deltas of a
	// block that a stream has not taken yet merge, and most events carry many deltas.
	if all := sum.Deltas + sum.CutDeltas; all == 0 || sum.DeltaEvents*2 > all {
		t.Errorf("%d deltas came in %d events: want them merged, at most one event for two deltas", all, sum.DeltaEvents)
	}
	if lateKiB > quarterKiB*3/2 {
		t.Errorf("agentd's RSS grew from %d KiB at 25%% of the soak to %d KiB at 95%%: more than 1.5×", quarterKiB, lateKiB)
	}

	if err := agentd.Terminate(e2eStopWithin); err != nil {
		t.Errorf("SIGTERM: %v, want exit status 0\n--- agentd log:\n%s", err, agentdLog())
	}
}

// rssKiB returns the process's VmRSS from /proc/<pid>/status (Linux). The test fails
// where it cannot be read: a flat-memory check on samples of 0 would pass silently.
func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("agentd's RSS: %v (the soak needs Linux's /proc)", err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil || n <= 0 {
				t.Fatalf("agentd's RSS: unreadable VmRSS line %q", line)
			}
			return n
		}
	}
	t.Fatalf("agentd's RSS: no VmRSS in /proc/%d/status", pid)
	return 0
}
