package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	hooksv1 "github.com/agentd/agentd/gen/agentd/hooks/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/agentdtest"
	"github.com/agentd/agentd/internal/logtest"
	"github.com/agentd/agentd/service/store/postgres/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Main(agentdtest.Main(m)))
}

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := parseConfig(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.listen != "localhost:50051" || cfg.shutdownTimeout != 30*time.Second || cfg.logLevel != slog.LevelInfo {
		t.Errorf("defaults = %+v", cfg)
	}
	if cfg.authTokensFile != "" || cfg.tlsCert != "" || cfg.tlsKey != "" || cfg.clientCA != "" || cfg.rateLimit != 50 || cfg.rateBurst != 100 {
		t.Errorf("security defaults = %+v, want no auth, no TLS, 50 calls a second with bursts of 100", cfg)
	}
}

func TestConfigSecurityFlagsFromEnvironment(t *testing.T) {
	cfg, err := parseConfig(nil, env(map[string]string{
		"AGENTD_AUTH_TOKENS_FILE": "/etc/agentd/tokens",
		"AGENTD_TLS_CERT":         "/etc/agentd/cert.pem",
		"AGENTD_TLS_KEY":          "/etc/agentd/key.pem",
		"AGENTD_CLIENT_CA":        "/etc/agentd/ca.pem",
		"AGENTD_RATE_LIMIT":       "2.5",
		"AGENTD_RATE_BURST":       "7",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.authTokensFile != "/etc/agentd/tokens" || cfg.tlsCert != "/etc/agentd/cert.pem" || cfg.tlsKey != "/etc/agentd/key.pem" || cfg.clientCA != "/etc/agentd/ca.pem" || cfg.rateLimit != 2.5 || cfg.rateBurst != 7 {
		t.Errorf("from environment = %+v", cfg)
	}
	cfg, err = parseConfig([]string{"--rate-limit=0", "--auth-tokens-file=/run/tokens"}, env(map[string]string{"AGENTD_RATE_LIMIT": "9", "AGENTD_AUTH_TOKENS_FILE": "/etc/agentd/tokens"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.rateLimit != 0 || cfg.authTokensFile != "/run/tokens" {
		t.Errorf("flags over environment = %+v, want the flags' values", cfg)
	}
}

func TestConfigRejectsIncompleteSecurity(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"--tls-cert=c.pem"}, want: "--tls-key"},
		{args: []string{"--tls-key=k.pem"}, want: "--tls-cert"},
		{env: map[string]string{"AGENTD_TLS_CERT": "c.pem"}, want: "--tls-key"},
		{args: []string{"--client-ca=ca.pem"}, want: "--client-ca"},
		{args: []string{"--client-ca=ca.pem", "--tls-key=k.pem"}, want: "--client-ca"},
		{args: []string{"--rate-limit=-1"}, want: "--rate-limit"},
		{args: []string{"--rate-burst=0"}, want: "--rate-burst"},
		{env: map[string]string{"AGENTD_RATE_LIMIT": "fast"}, want: "AGENTD_RATE_LIMIT"},
	} {
		_, err := parseConfig(tc.args, env(tc.env), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseConfig(%q, %v) error = %v, want one mentioning %s", tc.args, tc.env, err, tc.want)
		}
	}
	for _, args := range [][]string{
		{"--tls-cert=c.pem", "--tls-key=k.pem"},
		{"--tls-cert=c.pem", "--tls-key=k.pem", "--client-ca=ca.pem"},
		{"--rate-limit=0", "--rate-burst=0"},
	} {
		if _, err := parseConfig(args, env(nil), io.Discard); err != nil {
			t.Errorf("parseConfig(%q) = %v, want it accepted", args, err)
		}
	}
}

func TestConfigEnvironmentFallback(t *testing.T) {
	cfg, err := parseConfig(nil, env(map[string]string{
		"AGENTD_LISTEN":           "127.0.0.1:6000",
		"AGENTD_SHUTDOWN_TIMEOUT": "5s",
		"AGENTD_DRAIN_PERIOD":     "3s",
		"AGENTD_LOG_LEVEL":        "debug",
		"AGENTD_MODEL":            "workload:small",
		"AGENTD_CONTINUATION_KEY": "k",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.listen != "127.0.0.1:6000" || cfg.shutdownTimeout != 5*time.Second || cfg.drainPeriod != 3*time.Second || cfg.logLevel != slog.LevelDebug || cfg.model != "workload:small" || cfg.key != "k" {
		t.Errorf("from environment = %+v", cfg)
	}
}

func TestConfigFlagWinsOverEnvironment(t *testing.T) {
	cfg, err := parseConfig([]string{"--listen", "127.0.0.1:7000"}, env(map[string]string{"AGENTD_LISTEN": "127.0.0.1:6000"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.listen != "127.0.0.1:7000" {
		t.Errorf("listen = %q, want the flag's value", cfg.listen)
	}
}

func TestConfigBadEnvironmentValueNamesVariable(t *testing.T) {
	_, err := parseConfig(nil, env(map[string]string{"AGENTD_SHUTDOWN_TIMEOUT": "soon"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "AGENTD_SHUTDOWN_TIMEOUT") {
		t.Errorf("error = %v, want one naming AGENTD_SHUTDOWN_TIMEOUT", err)
	}
}

func TestConfigShutdownTimeoutMustOutlastTheDrainPeriod(t *testing.T) {
	_, err := parseConfig([]string{"--drain-period", "30s", "--shutdown-timeout", "10s"}, env(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--drain-period") {
		t.Errorf("error = %v", err)
	}
}

func TestConfigRejectsStrayArguments(t *testing.T) {
	if _, err := parseConfig([]string{"serve"}, env(nil), io.Discard); err == nil {
		t.Error("stray argument accepted")
	}
	if _, err := parseConfig([]string{"--help"}, env(nil), io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help error = %v, want flag.ErrHelp", err)
	}
}

// The daemon serves health on a real loopback port and stops cleanly when its context ends.
func TestServeAndShutdownOnLoopback(t *testing.T) {
	srv := startServe(t, []string{"--demo-delay=0"}, slog.New(slog.DiscardHandler))
	conn := dial(t, srv.addr, nil)
	resp, err := healthpb.NewHealthClient(conn).Check(srv.ctx, &healthpb.HealthCheckRequest{Service: "agentd.v1.AgentService"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health = %v, want SERVING", resp.GetStatus())
	}
	out, err := askDemo(srv.ctx, conn)
	if err != nil || out != "2+2 = 4" {
		t.Errorf("ExecuteRun = %v, %v; want the demo agent to answer 2+2 = 4", out, err)
	}
	if err := srv.stop(); err != nil {
		t.Errorf("serve returned %v after shutdown, want nil", err)
	}
}

func TestRunFailsOnBusyAddress(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	err = run(t.Context(), []string{"--listen", lis.Addr().String()}, env(nil), io.Discard)
	if err == nil {
		t.Fatal("run on a busy address succeeded")
	}
}

// --audit installs the audit hook through the hook interceptors: the daemon records
// every tool call of every run, over a unary RPC (ExecuteRun) and a stream (StartRun)
// alike, its arguments redacted; without --audit it records none.
func TestServeAuditFlagLogsEveryToolCall(t *testing.T) {
	for _, audit := range []bool{true, false} {
		t.Run(fmt.Sprintf("audit=%v", audit), func(t *testing.T) {
			args := []string{"--demo-delay=0"}
			if audit {
				args = append(args, "--audit")
			}
			var logs logtest.Buffer
			srv := startServe(t, args, slog.New(slog.NewJSONHandler(&logs, nil)))
			ctx := srv.ctx
			client := agentdv1.NewAgentServiceClient(dial(t, srv.addr, nil))
			if _, err := client.ExecuteRun(ctx, &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{Input: "what is 2+2?"}}); err != nil {
				t.Fatal(err)
			}
			stream, err := client.StartRun(ctx, &agentdv1.StartRunRequest{Start: &agentdv1.RunSpec{Input: "what is 2+2?"}})
			if err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := stream.Recv(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
			}
			if err := srv.stop(); err != nil {
				t.Fatal(err)
			}

			var calls []map[string]any
			for _, rec := range logs.Records(t) {
				if rec["msg"] == "tool call" {
					calls = append(calls, rec)
				}
			}
			want := 0
			if audit {
				want = 2 // one a run
			}
			if len(calls) != want {
				t.Fatalf("%d tool call records, want %d:\n%s", len(calls), want, logs.String())
			}
			for i, c := range calls {
				if c["tool"] != "calculate" || c["executed"] != true || c["is_error"] != false || c["agent"] != "demo" || c["run_id"] == "" || c["arguments"] != "[redacted]" {
					t.Errorf("tool call record %d: %v, want calculate executed without error, agent demo, with its run, arguments redacted", i, c)
				}
			}
			if audit && calls[0]["run_id"] == calls[1]["run_id"] {
				t.Errorf("both tool call records are of run %v, want one a run", calls[0]["run_id"])
			}
			if strings.Contains(logs.String(), "2+2") {
				t.Errorf("the log shows a tool call's arguments:\n%s", logs.String())
			}
		})
	}
}

// denyTools is a HookService that denies every tool call.
type denyTools struct {
	hooksv1.UnimplementedHookServiceServer
}

func (denyTools) BeforeTool(context.Context, *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
	return &hooksv1.BeforeToolResponse{Decision: hooksv1.Decision_DECISION_DENY, Reason: "no tools today"}, nil
}

// --audit, a server-wide hook, runs before the agent's own hooks, yet records what they
// decide: here a remote hook of the agents file denies the demo agent's calculate call.
func TestServeAuditFlagRecordsTheDecisionsOfTheAgentsHooks(t *testing.T) {
	hookLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := grpc.NewServer()
	hooksv1.RegisterHookServiceServer(hs, denyTools{})
	hookServed := make(chan struct{})
	go func() {
		defer close(hookServed)
		_ = hs.Serve(hookLis)
	}()
	defer func() {
		hs.Stop()
		<-hookServed
	}()
	agentsFile := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(agentsFile, []byte(`
agents:
  - name: demo
    model: demo
    hooks:
      remote:
        - address: `+hookLis.Addr().String()+`
          points: [before_tool]
`), 0o600); err != nil {
		t.Fatal(err)
	}

	var logs logtest.Buffer
	srv := startServe(t, []string{"--audit", "--config", agentsFile, "--demo-delay=0"}, slog.New(slog.NewJSONHandler(&logs, nil)))
	if _, err := askDemo(srv.ctx, dial(t, srv.addr, nil)); err != nil {
		t.Fatal(err)
	}
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}

	var decisions []map[string]any
	for _, rec := range logs.Records(t) {
		if rec["msg"] == "tool call decision" {
			decisions = append(decisions, rec)
		}
	}
	if len(decisions) != 1 {
		t.Fatalf("%d tool call decision records, want 1 (the remote hook's denial):\n%s", len(decisions), logs.String())
	}
	d := decisions[0]
	if d["tool"] != "calculate" || d["decision"] != "denied" || d["decided_by"] != "hook" || d["reason"] != "no tools today" || d["agent"] != "demo" {
		t.Errorf("decision record %v, want calculate denied by hook: no tools today, agent demo", d)
	}
}

// served is the daemon's serve running on a loopback port for a test.
type served struct {
	addr string
	// ctx ends when stop is called.
	ctx context.Context
	// stop shuts the daemon down as a signal would and returns what serve returned.
	stop func() error
}

// startServe runs serve, configured by args as on the command line with short shutdown
// bounds, on a loopback port until stop is called or the test ends; log is its logger.
func startServe(t testing.TB, args []string, log *slog.Logger) *served {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseConfig(append([]string{"--shutdown-timeout=2s", "--drain-period=1s"}, args...), env(nil), io.Discard)
	if err != nil {
		lis.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, lis, log) }()
	var once sync.Once
	var serveErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			serveErr = <-done
		})
		return serveErr
	}
	t.Cleanup(func() { stop() })
	return &served{addr: lis.Addr().String(), ctx: ctx, stop: stop}
}

// In text logs agentd first says, in one line for a person, where it serves and what:
// before any warning, and before the listening records. JSON logs, which collectors
// parse, get no such line.
func TestStartupLineComesFirstInTextLogs(t *testing.T) {
	out := runUntilListening(t, "--log-format=text", `msg="agentd listening"`)
	lines := strings.Split(out, "\n")
	if !regexp.MustCompile(`^agentd \S+ serving gRPC on localhost:\d+ · console http://localhost:\d+/ · agent demo on the built-in demo model \(--model or --config for a real one\)$`).MatchString(lines[0]) {
		t.Errorf("first line %q, want where agentd serves and what:\n%s", lines[0], out)
	}
	warning := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "no continuation key configured") })
	listening := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "agentd HTTP listening") })
	if warning < 1 || listening < 1 {
		t.Errorf("the continuation key warning is line %d, the listening record line %d; want both after the first:\n%s", warning, listening, out)
	}
	for _, l := range lines[1:] {
		if l != "" && !strings.HasPrefix(l, "time=") {
			t.Errorf("line %q after the first is no log record", l)
		}
	}
}

func TestStartupLineNotInJSONLogs(t *testing.T) {
	out := runUntilListening(t, "--log-format=json", `"msg":"agentd listening"`)
	for l := range strings.Lines(out) {
		if !json.Valid([]byte(l)) {
			t.Errorf("line %q of JSON logs is no JSON object:\n%s", l, out)
		}
	}
}

// runUntilListening runs agentd as main does, with logFormat, on loopback ports until it
// has logged listening, then shuts it down and returns what it wrote to stderr.
func runUntilListening(t *testing.T, logFormat, listening string) string {
	t.Helper()
	out := &waitWriter{want: listening, seen: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{logFormat, "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0", "--demo-delay=0", "--shutdown-timeout=2s", "--drain-period=1s"}, env(nil), out)
	}()
	select {
	case <-out.seen:
	case err := <-done:
		t.Fatalf("run returned %v before listening:\n%s", err, out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	return out.String()
}

// waitWriter is an io.Writer safe for concurrent use that closes seen once what was
// written holds want.
type waitWriter struct {
	want string
	seen chan struct{}

	mu   sync.Mutex
	b    strings.Builder
	done bool
}

func (w *waitWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if !w.done && strings.Contains(w.b.String(), w.want) {
		w.done = true
		close(w.seen)
	}
	return len(p), nil
}

func (w *waitWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
