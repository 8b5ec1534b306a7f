package main

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/runtime/llm/workload"
)

// TestLoadWorkload runs `agentctl load` against the real agentd serving the small
// benchmark workload: every run completes, with every delta of the workload.
func TestLoadWorkload(t *testing.T) {
	bin := agentdBinary(t)
	addr, err := startAgentd(bin, insecureCreds(), "--model", "workload:small", "--rate-limit", "0")
	if err != nil {
		t.Fatal(err)
	}
	small, err := workload.Lookup("small")
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	r := ctl{}.run(t, "--plaintext", "--addr", addr, "load", "--concurrency", "8", "--duration", "2s", "--json", "--server-pid", strconv.Itoa(os.Getpid()))
	took := time.Since(start)
	if r.code != exitOK {
		t.Fatalf("load: %v", r)
	}
	if took > 5*time.Second {
		t.Errorf("load --duration 2s took %v", took)
	}
	var sum loadSummary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("the summary is not JSON: %v\n%s", err, r)
	}
	if sum.Runs == 0 || sum.Failed != 0 || len(sum.Errors) != 0 {
		t.Errorf("%d runs completed, %d failed (%v); want some, and none failed", sum.Runs, sum.Failed, sum.Errors)
	}
	if want := int64(small.Deltas()) * int64(sum.Runs); sum.Deltas != want {
		t.Errorf("%d deltas in %d runs, want %d (%d a run)", sum.Deltas, sum.Runs, want, small.Deltas())
	}
	if sum.Elapsed < 1.9 || sum.Elapsed > 3 {
		t.Errorf("elapsed %.2fs, want about 2s", sum.Elapsed)
	}
	if sum.RunsPerSec <= 0 || sum.DeltasPerSec <= 0 {
		t.Errorf("runs/s %v, deltas/s %v, want both positive", sum.RunsPerSec, sum.DeltasPerSec)
	}
	for name, p := range map[string]*loadPercentiles{"first event": sum.FirstEventMS, "finish": sum.FinishMS} {
		if p == nil || p.P50 <= 0 || p.P50 > p.P90 || p.P90 > p.P99 || p.P99 > p.Max {
			t.Errorf("%s percentiles %+v, want 0 < p50 <= p90 <= p99 <= max", name, p)
		}
	}
	if sum.FirstEventMS != nil && sum.FinishMS != nil && sum.FirstEventMS.P50 > sum.FinishMS.P50 {
		t.Errorf("first event p50 %v ms after finish p50 %v ms", sum.FirstEventMS.P50, sum.FinishMS.P50)
	}
	// --server-pid is this test process here: any live process will do.
	if sum.ServerRSS == nil || sum.ServerRSS.PeakKiB <= 0 || sum.ServerRSS.Samples < 2 {
		t.Errorf("server RSS %+v (%s), want samples", sum.ServerRSS, sum.ServerRSSNote)
	}

	// The summary for a person, with --runs ending the load before --duration.
	r = ctl{}.run(t, "--plaintext", "--addr", addr, "load", "--concurrency", "3", "--runs", "7", "--duration", "1m")
	if r.code != exitOK {
		t.Fatalf("load --runs 7: %v", r)
	}
	for _, want := range []string{"runs:        7 completed, 0 failed, 0 cut", "runs/s", "first event: p50 ", "finish:      p50 ", "errors:      none"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in the summary:\n%s", want, r.stdout)
		}
	}
}

// TestLoadInterrupt stops the load with Ctrl-C: it still reports, and exits 130.
func TestLoadInterrupt(t *testing.T) {
	bin := agentdBinary(t)
	addr, err := startAgentd(bin, insecureCreds(), "--model", "workload:small", "--rate-limit", "0")
	if err != nil {
		t.Fatal(err)
	}
	interrupts := make(chan os.Signal, 1)
	time.AfterFunc(300*time.Millisecond, func() { interrupts <- os.Interrupt })
	start := time.Now()
	r := ctl{interrupts: interrupts}.run(t, "--plaintext", "--addr", addr, "load", "--concurrency", "4", "--duration", "1m")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Ctrl-C took %v to stop the load", took)
	}
	if r.code != exitCancel || !strings.Contains(r.stdout, "stopped by Ctrl-C") || !strings.Contains(r.stdout, "errors:      none") {
		t.Errorf("want exit 130 and a summary with no errors:\n%v", r)
	}
}

// TestLoadNoServer counts the failed calls by status code.
func TestLoadNoServer(t *testing.T) {
	r := ctl{}.run(t, "--plaintext", "--addr", "127.0.0.1:1", "load", "--concurrency", "2", "--runs", "4", "--json")
	if r.code != exitFailed {
		t.Fatalf("want exit 1: %v", r)
	}
	var sum loadSummary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("the summary is not JSON: %v\n%s", err, r)
	}
	if sum.Runs != 0 || sum.Failed != 4 || sum.Errors["rpc Unavailable"] != 4 {
		t.Errorf("runs %d, failed %d, errors %v; want 4 failed, rpc Unavailable", sum.Runs, sum.Failed, sum.Errors)
	}
}

func TestLoadFlags(t *testing.T) {
	cmd, err := parseCommand([]string{"load", "--concurrency", "3", "--duration", "5s", "--runs", "9", "--input", "hi", "--agent", "a", "--server-pid", "42", "--json", "--plaintext"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := loadConfig{concurrency: 3, duration: 5 * time.Second, runs: 9, input: "hi", agent: "a", serverPID: 42, json: true}
	if cmd.name != "load" || cmd.load == nil || *cmd.load != want || !cmd.conn.plaintext {
		t.Errorf("parseCommand = %+v, load %+v; want load %+v", cmd, cmd.load, want)
	}
	cmd, err = parseCommand([]string{"load"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if want := (loadConfig{concurrency: 50, duration: 30 * time.Second, input: defaultLoadInput}); *cmd.load != want {
		t.Errorf("defaults %+v, want %+v", *cmd.load, want)
	}
	for _, args := range [][]string{{"load", "--concurrency", "0"}, {"load", "--duration", "0s"}, {"load", "--runs", "-1"}, {"load", "prompt"}} {
		if _, err := parseCommand(args, func(string) string { return "" }); err == nil {
			t.Errorf("parseCommand(%q) took it", args)
		}
	}
}
