// Command agentd runs AI agents behind gRPC.
//
// Every flag can also be set through an environment variable named AGENTD_ followed by the
// flag's name in upper case with dashes as underscores (--listen: AGENTD_LISTEN). A flag on
// the command line wins over the environment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/agentd/agentd/hooks"
	"github.com/agentd/agentd/hooks/audit"
	"github.com/agentd/agentd/internal/version"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		if errors.Is(err, errVersion) {
			fmt.Println(version.String("agentd"))
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "agentd:", err)
		os.Exit(1)
	}
}

// config is agentd's configuration, from flags and AGENTD_* variables.
type config struct {
	listen          string
	config          string
	model           string
	demoDelay       time.Duration
	shutdownTimeout time.Duration
	drainPeriod     time.Duration
	logLevel        slog.Level
	logFormat       string
	audit           bool
	maxRuns         int
	maxMessageBytes int
	keyFile         string
	key             string // AGENTD_CONTINUATION_KEY: never a flag, so it stays out of ps
	authTokensFile  string
	tlsCert         string
	tlsKey          string
	clientCA        string
	rateLimit       float64
	rateBurst       int
	limitByPeerIP   bool
	metricsListen   string
	recordContent   bool

	// The HTTP listener (http.go).
	httpListen       string
	httpCORSOrigins  string
	httpAllowedHosts string

	// The store of runs, journals and threads (store.go).
	store              string
	storeMaxBytes      int64
	journalMaxRunBytes int64
	runRetention       time.Duration
	parkTimeout        time.Duration
	parkAfter          time.Duration
	exactDeltas        bool
	replicaID          string
	leaseTTL           time.Duration
	threadRetention    time.Duration

	// Runs (service.Config).
	maxRunsPerCaller   int
	maxAttachPerRun    int
	maxAttachPerCaller int
	startTimeout       time.Duration
	stallTimeout       time.Duration
	maxApprovalTimeout time.Duration
	// Parked runs (service.Config's MaxParked fields); 0 turns a cap off.
	maxParkedRuns           int
	maxParkedRunsPerCaller  int
	maxParkedBytes          int64
	maxParkedBytesPerCaller int64

	// Connections and streams (limits.go).
	maxConnections       int
	maxConnectionsPerIP  int
	maxStreamsPerConn    int
	handshakeTimeout     time.Duration
	keepaliveMinTime     time.Duration
	keepaliveTime        time.Duration
	keepaliveTimeout     time.Duration
	maxConnIdle          time.Duration
	maxConnAge           time.Duration
	maxConnAgeGrace      time.Duration
	maxHealthWatches     int
	maxHealthWatchesPeer int
}

// errVersion is parseConfig's answer to --version: main prints the version and exits.
var errVersion = errors.New("version asked")

// parseConfig reads flags from args, then fills every flag not given on the command line
// from its AGENTD_* variable.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("agentd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.listen, "listen", "localhost:50051", "`address` to serve gRPC on")
	fs.StringVar(&cfg.httpListen, "http-listen", "", "`address` to serve agentd over HTTP on as well (such as localhost:8080): the web console at /, and every RPC over the Connect protocol (plain JSON from curl), gRPC-Web and gRPC; without it none is served")
	fs.StringVar(&cfg.httpAllowedHosts, "http-allowed-hosts", "", "`names` (comma-separated; .example.com for it and every name under it; * for any) that the HTTP listener serves requests for when it has no auth, besides localhost, IP addresses, this machine's name and the host of --http-listen: a page of another site whose name resolves to agentd's address (DNS rebinding) is refused")
	fs.StringVar(&cfg.httpCORSOrigins, "http-cors-origins", "", "`origins` (comma-separated, such as https://console.example.com; * for any) whose web pages may call agentd over --http-listen; by default none, so only the console agentd serves itself can")
	fs.StringVar(&cfg.config, "config", "", "agents `file` (YAML); without one agentd serves the built-in demo agent")
	fs.StringVar(&cfg.model, "model", "", "`model` for the default agent, such as workload:medium (default: the configured one, or the demo model)")
	fs.DurationVar(&cfg.demoDelay, "demo-delay", 20*time.Millisecond, "pause between the demo model's deltas, so a person sees the answer stream")
	fs.DurationVar(&cfg.drainPeriod, "drain-period", 20*time.Second, "after SIGTERM, how long running runs may take before they end SHUTDOWN with a continuation")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 30*time.Second, "after SIGTERM, how long until the process exits whatever is still open (longer than --drain-period)")
	fs.IntVar(&cfg.maxRuns, "max-runs", 1024, "runs in progress at most; more are refused with RESOURCE_EXHAUSTED")
	fs.IntVar(&cfg.maxAttachPerRun, "max-attachments-per-run", 64, "streams attached to one run at once (AttachRun, Run streams that attach, the one that started it); one more is refused with RESOURCE_EXHAUSTED (TOO_MANY_ATTACHMENTS)")
	fs.IntVar(&cfg.maxAttachPerCaller, "max-attachments-per-caller", 256, "streams one caller (bearer token or client certificate) has attached to runs at once; one more is refused with RESOURCE_EXHAUSTED (TOO_MANY_ATTACHMENTS)")
	fs.IntVar(&cfg.maxRunsPerCaller, "max-runs-per-caller", 0, "runs in progress at most of one caller (bearer token or client certificate; with --limit-by-peer-ip, an unauthenticated caller's IP); more are refused with RESOURCE_EXHAUSTED; 0 turns the limit off (default a quarter of --max-runs)")
	fs.DurationVar(&cfg.startTimeout, "start-timeout", 30*time.Second, "how long a Run stream may stay open without its start message; then it ends DEADLINE_EXCEEDED")
	fs.DurationVar(&cfg.stallTimeout, "stall-timeout", 2*time.Minute, "how long a stream's client may read nothing while agentd has events for it; then the stream is let go and the run goes on (under on_disconnect CANCEL the run ends FAILED, CLIENT_STALLED, with its transcript)")
	fs.DurationVar(&cfg.maxApprovalTimeout, "max-approval-timeout", 24*time.Hour, "longest approval_timeout a run may ask for; a longer one is refused with INVALID_ARGUMENT")
	fs.IntVar(&cfg.maxMessageBytes, "max-message-bytes", 4<<20, "largest client message accepted, in bytes")
	fs.StringVar(&cfg.store, "store", "memory", "where runs, their journals and threads are kept: memory (bounded, gone with the process), sqlite:`PATH` (one replica, across restarts) or a postgres:// URL (shared by replicas)")
	fs.Int64Var(&cfg.storeMaxBytes, "store-max-bytes", 64<<20, "with --store memory, the bytes it holds at most: past it the runs that finished first go, then the threads idle the longest")
	fs.Int64Var(&cfg.journalMaxRunBytes, "journal-max-run-bytes", 8<<20, "with --store memory, the bytes of one run's journal kept: past it the oldest events go, and attaching from before them is refused (EVENTS_EXPIRED)")
	fs.BoolVar(&cfg.exactDeltas, "exact-deltas", false, "send every delta the model streams as an event of its own, to a client that is behind too; by default consecutive deltas of one block that no client has taken yet merge into one, which costs the server and the client less")
	fs.DurationVar(&cfg.parkAfter, "park-after", 30*time.Second, "how long a run waits live for an answer from a Run stream attached to it before it parks all the same (a run with no such stream parks at once); 0 waits live as long as such a stream is attached")
	fs.StringVar(&cfg.replicaID, "replica-id", "", "this replica's `name` among those sharing a --store postgres:// database: the holder of the leases on its runs (default the host name and a random suffix)")
	fs.DurationVar(&cfg.leaseTTL, "lease-ttl", 10*time.Second, "with a store on disk, how long a run's lease lasts unless renewed (every third of it): how long a run of a replica that died waits before another takes it up")
	fs.DurationVar(&cfg.parkTimeout, "park-timeout", 24*time.Hour, "how long a run whose client went away waits, parked, for the input it needs (an approval, a client tool's result) before it ends EXPIRED")
	fs.IntVar(&cfg.maxParkedRuns, "max-parked-runs", 0, "runs parked at most (their clients gone while they wait for an approval or a client tool's result); a run that would park past it ends AWAITING_INPUT with its continuation instead, for its client to resume; 0 turns the cap off (default 4 times --max-runs)")
	fs.IntVar(&cfg.maxParkedRunsPerCaller, "max-parked-runs-per-caller", 0, "runs parked at most of one caller (as --max-runs-per-caller counts callers); past it the caller's run that would park ends AWAITING_INPUT with its continuation; 0 turns the cap off (default a quarter of --max-parked-runs)")
	fs.Int64Var(&cfg.maxParkedBytes, "max-parked-bytes", 256<<20, "bytes of the parked runs' checkpoints (their transcripts) at most, which --store memory holds in memory for up to --park-timeout; a run that would park past it ends AWAITING_INPUT with its continuation; 0 turns the cap off")
	fs.Int64Var(&cfg.maxParkedBytesPerCaller, "max-parked-bytes-per-caller", 0, "bytes of one caller's parked runs' checkpoints at most; past it the caller's run that would park ends AWAITING_INPUT with its continuation; 0 turns the cap off (default a quarter of --max-parked-bytes)")
	fs.DurationVar(&cfg.runRetention, "run-retention", 24*time.Hour, "how long a finished run and its journal are kept for clients that attach to it")
	fs.DurationVar(&cfg.threadRetention, "thread-retention", 30*24*time.Hour, "how long a thread no run adds to is kept")
	fs.StringVar(&cfg.keyFile, "continuation-key-file", "", "`file` holding the key that signs continuations (or set AGENTD_CONTINUATION_KEY); every replica needs the same")
	fs.StringVar(&cfg.authTokensFile, "auth-tokens-file", "", "`file` of bearer tokens, one a line (# comments): every call but health and reflection then needs \"authorization: Bearer <token>\"; without one there is no auth")
	fs.StringVar(&cfg.tlsCert, "tls-cert", "", "PEM certificate `file` to serve TLS with (needs --tls-key)")
	fs.StringVar(&cfg.tlsKey, "tls-key", "", "PEM private key `file` of --tls-cert")
	fs.StringVar(&cfg.clientCA, "client-ca", "", "PEM CA certificates `file`: with it clients must present a certificate one of them signed (mTLS; needs --tls-cert)")
	fs.Float64Var(&cfg.rateLimit, "rate-limit", 50, "calls a second per caller (bearer token or client certificate; with --limit-by-peer-ip, an unauthenticated caller's IP; health and reflection are exempt); beyond it RESOURCE_EXHAUSTED; 0 turns the limit off")
	fs.IntVar(&cfg.rateBurst, "rate-burst", 100, "calls a caller may make at once, before --rate-limit paces it (the token bucket's size)")
	fs.BoolVar(&cfg.limitByPeerIP, "limit-by-peer-ip", false, "apply --rate-limit and --max-runs-per-caller to callers without a token or client certificate by their IP address; without it they have no per-caller limit. Wrong behind a proxy or mesh sidecar, where every caller has the proxy's address")
	fs.IntVar(&cfg.maxConnections, "max-connections", 4096, "connections open at once; one more is closed as soon as it is accepted (its client gets UNAVAILABLE); 0 turns the cap off")
	fs.IntVar(&cfg.maxConnectionsPerIP, "max-connections-per-ip", 0, "connections open at once from one IP address, on each listener; one more is closed as soon as it is accepted (UNAVAILABLE); by default a quarter of --max-connections; 0 turns the cap off. Behind a proxy or mesh sidecar every caller has the proxy's address")
	fs.IntVar(&cfg.maxStreamsPerConn, "max-streams-per-connection", 1024, "concurrent streams (RPCs) on one connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): gRPC clients queue the calls beyond it")
	fs.DurationVar(&cfg.handshakeTimeout, "handshake-timeout", 20*time.Second, "how long a new connection has to finish its TLS and HTTP/2 handshake before it is closed")
	fs.DurationVar(&cfg.keepaliveMinTime, "keepalive-min-time", 5*time.Second, "shortest interval between a client's keepalive pings; a client pinging more often is sent away (GOAWAY too_many_pings: its calls end UNAVAILABLE)")
	fs.DurationVar(&cfg.keepaliveTime, "keepalive-time", time.Minute, "after this long without a frame from a client, agentd pings it (at least 1s)")
	fs.DurationVar(&cfg.keepaliveTimeout, "keepalive-timeout", 20*time.Second, "a client that does not answer a ping within this long is taken for dead: its connection is closed and its streams end")
	fs.DurationVar(&cfg.maxConnIdle, "max-connection-idle", 5*time.Minute, "a connection without a stream for this long is closed (with a GOAWAY: its client reconnects when it needs to); 0 keeps idle connections open")
	fs.DurationVar(&cfg.maxConnAge, "max-connection-age", 0, "a connection this old gets a GOAWAY (new calls go to a new connection, possibly another replica); 0 means no age limit, as runs may wait hours on an approval")
	fs.DurationVar(&cfg.maxConnAgeGrace, "max-connection-age-grace", 0, "after --max-connection-age, how long the connection's streams may go on before it is closed; 0 lets them finish")
	fs.IntVar(&cfg.maxHealthWatches, "max-health-watches", 1024, "grpc.health.v1.Health/Watch streams open at once; more are refused with RESOURCE_EXHAUSTED (Check is never limited); 0 turns the cap off")
	fs.IntVar(&cfg.maxHealthWatchesPeer, "max-health-watches-per-peer", 64, "Health/Watch streams open at once from one IP address (behind a proxy or mesh every caller has the proxy's); 0 turns the cap off")
	fs.TextVar(&cfg.logLevel, "log-level", slog.LevelInfo, "minimum `level` of logs: debug, info, warn, error")
	fs.StringVar(&cfg.logFormat, "log-format", "", "`format` of logs: text (key=value lines, for people) or json (one object a line, for collectors); by default text when stderr is a terminal, json otherwise")
	fs.BoolVar(&cfg.audit, "audit", false, "log one audit record per tool call and decision of every run (arguments redacted); it records what every hook decided, the agents' own included, wherever it sits in the chain")
	fs.StringVar(&cfg.metricsListen, "metrics-listen", "", "`address` to serve Prometheus metrics on, at /metrics (such as localhost:9464); without it none is served. Traces and pushed metrics are configured by the standard OTEL_* variables")
	fs.BoolVar(&cfg.recordContent, "record-content", false, "record prompts, model output, tool arguments and tool results on trace spans (gen_ai.input.messages, …); off by default, as they may hold personal data")
	showVersion := fs.Bool("version", false, "print agentd's version (module version and VCS revision) and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: agentd [flags]\n\nagentd runs AI agents behind gRPC (agentd.v1.AgentService).\n"+
			"Each flag may also be set as AGENTD_<FLAG> in the environment (--listen: AGENTD_LISTEN).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if *showVersion {
		return config{}, errVersion
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	set := map[string]bool{} // given on the command line or in the environment
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || f.Name == "version" { // AGENTD_VERSION may well name an image's
			return
		}
		name := envName(f.Name)
		if v := getenv(name); v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			}
			set[f.Name] = true
		}
	})
	cfg.key = getenv("AGENTD_CONTINUATION_KEY")
	if !set["max-connections-per-ip"] {
		cfg.maxConnectionsPerIP = cfg.maxConnections / 4
	}
	if !set["max-runs-per-caller"] {
		cfg.maxRunsPerCaller = max(1, cfg.maxRuns/4)
	}
	// A parked run holds no slot of --max-runs, only memory (its checkpoint), so several
	// times as many may wait as run; a caller's share is a quarter, as of runs. With the
	// total off, so is the share unless it is set.
	if !set["max-parked-runs"] {
		cfg.maxParkedRuns = 4 * cfg.maxRuns
	}
	if !set["max-parked-runs-per-caller"] && cfg.maxParkedRuns > 0 {
		cfg.maxParkedRunsPerCaller = max(1, cfg.maxParkedRuns/4)
	}
	if !set["max-parked-bytes-per-caller"] && cfg.maxParkedBytes > 0 {
		cfg.maxParkedBytesPerCaller = max(1, cfg.maxParkedBytes/4)
	}
	errs = append(errs, cfg.checkLimits()...)
	errs = append(errs, cfg.checkHTTP()...)
	if cfg.shutdownTimeout <= cfg.drainPeriod {
		errs = append(errs, fmt.Errorf("--shutdown-timeout (%s) must be longer than --drain-period (%s)", cfg.shutdownTimeout, cfg.drainPeriod))
	}
	if (cfg.tlsCert == "") != (cfg.tlsKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together: give both or neither"))
	}
	if cfg.clientCA != "" && cfg.tlsCert == "" {
		errs = append(errs, errors.New("--client-ca (mTLS) needs TLS: give --tls-cert and --tls-key too"))
	}
	if cfg.rateLimit < 0 {
		errs = append(errs, fmt.Errorf("--rate-limit (%g) must not be negative; 0 turns the limit off", cfg.rateLimit))
	}
	if cfg.rateLimit > 0 && cfg.rateBurst < 1 {
		errs = append(errs, fmt.Errorf("--rate-burst (%d) must be at least 1 when --rate-limit is set", cfg.rateBurst))
	}
	switch cfg.logFormat {
	case "", "text", "json":
	default:
		errs = append(errs, fmt.Errorf("--log-format %q: want text or json", cfg.logFormat))
	}
	return cfg, errors.Join(errs...)
}

// logHandler returns the handler of --log-format: text or json, and for "" text when w
// is a terminal, json otherwise.
func logHandler(format string, w io.Writer, opts *slog.HandlerOptions) slog.Handler {
	if format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			format = "text"
		}
	}
	if format == "text" {
		return slog.NewTextHandler(w, opts)
	}
	return slog.NewJSONHandler(w, opts)
}

// envName is the environment variable that stands in for the flag name.
func envName(flagName string) string {
	return "AGENTD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(traceHandler{logHandler(cfg.logFormat, stderr, &slog.HandlerOptions{Level: cfg.logLevel})})
	lis, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, lis, log)
}

// serve runs agentd on lis until ctx is done, then shuts down gracefully: health turns
// NOT_SERVING, streams get go_away, runs get cfg.drainPeriod to finish and then end
// SHUTDOWN with a continuation, and whatever is still open after cfg.shutdownTimeout is
// closed.
func serve(ctx context.Context, cfg config, lis net.Listener, log *slog.Logger) error {
	// Telemetry first, so the stats handler and the agents find it; it is flushed last,
	// once every run and RPC has ended.
	tel, err := setupTelemetry(ctx, cfg, log)
	if err != nil {
		lis.Close()
		return err
	}
	defer tel.shutdown(log)
	opts, err := serverOptions(cfg, log, nil, nil)
	if err != nil {
		lis.Close()
		return err
	}
	srv, err := newServer(cfg, log, tel)
	if err != nil {
		lis.Close()
		return err
	}
	// Deferred, so it runs once the gRPC server has stopped and no run uses an agent: it
	// stops the MCP servers and closes the remote hook connections.
	defer func() {
		if err := srv.close(); err != nil {
			log.Warn("closing the agents", "error", err)
		}
	}()
	// Runs a stopped agentd left in a store on disk go on, with the hooks every run has.
	recoverCtx := context.WithoutCancel(ctx)
	if cfg.audit {
		recoverCtx = hooks.NewContext(recoverCtx, audit.New(log))
	}
	if _, err := srv.RecoverRuns(recoverCtx); err != nil {
		lis.Close()
		return fmt.Errorf("recovering the runs in the store: %w", err)
	}
	gs := grpc.NewServer(opts...)
	srv.register(gs)
	var hs *http.Server
	var httpLis net.Listener
	if cfg.httpListen != "" {
		if hs, httpLis, err = listenHTTP(gs, cfg, log); err != nil {
			lis.Close()
			return err
		}
	}

	served := make(chan error, 2)
	go func() {
		served <- gs.Serve(limitConnections(lis, cfg.maxConnections, cfg.maxConnectionsPerIP, userTimeout(cfg), log))
	}()
	if hs != nil {
		console := consoleURL(httpLis.Addr(), hs.TLSConfig != nil)
		go func() {
			served <- serveHTTP(hs, limitConnections(httpLis, cfg.maxConnections, cfg.maxConnectionsPerIP, 0, log))
		}()
		log.Info("agentd HTTP listening", "http_addr", httpLis.Addr().String(), "console", console,
			"cors_origins", corsOrigins(cfg.httpCORSOrigins))
		if cfg.authTokensFile == "" && cfg.clientCA == "" && !isLoopback(httpLis.Addr()) {
			log.Warn("no authentication: anyone who reaches " + httpLis.Addr().String() + " (HTTP) can run agents; set --auth-tokens-file (AGENTD_AUTH_TOKENS_FILE) or --client-ca, or listen on loopback")
		}
	}
	log.Info("agentd listening", "addr", lis.Addr().String(),
		"tls", cfg.tlsCert != "", "mtls", cfg.clientCA != "", "bearer_auth", cfg.authTokensFile != "",
		"rate_limit", cfg.rateLimit, "max_runs_per_caller", cfg.maxRunsPerCaller, "limit_by_peer_ip", cfg.limitByPeerIP,
		"max_connections", cfg.maxConnections, "max_connections_per_ip", cfg.maxConnectionsPerIP, "store", storeName(cfg.store))
	if cfg.authTokensFile == "" && cfg.clientCA == "" && !isLoopback(lis.Addr()) {
		log.Warn("no authentication: anyone who reaches " + lis.Addr().String() + " can run agents; set --auth-tokens-file (AGENTD_AUTH_TOKENS_FILE) or --client-ca, or listen on loopback")
	}

	select {
	case err := <-served:
		if hs != nil {
			hs.Close()
		}
		gs.Stop()
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "drain_period", cfg.drainPeriod.String(), "timeout", cfg.shutdownTimeout.String())
	stopCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := srv.shutdown(stopCtx, cfg.drainPeriod); err != nil {
		log.Warn("runs still open at the shutdown timeout", "runs", srv.ActiveRuns())
	}
	if hs != nil {
		// The HTTP calls end first, so that they deliver their last events: the gRPC
		// server's stop closes any HTTP stream still open at once.
		shutdownHTTP(stopCtx, hs)
	}
	if err := service.GracefulStop(stopCtx, gs); err != nil {
		log.Warn("shutdown timeout reached: closed open streams")
	}
	listeners := 1
	if hs != nil {
		hs.Close()
		listeners++
	}
	for range listeners {
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return err
		}
	}
	log.Info("agentd stopped")
	return nil
}

// daemon is agentd's service with what agentd owns around it: the agents of its agents
// file, and the health service of the whole server.
type daemon struct {
	*service.Server
	agents *agents.Registry
	health *health.Server
	store  store.Store
}

// newServer builds the service from the configuration; tel may be nil. The caller closes
// the daemon once the server has stopped; on error nothing is left to close.
func newServer(cfg config, log *slog.Logger, tel *telemetry) (*daemon, error) {
	if tel == nil {
		tel = &telemetry{}
	}
	file := agents.Default()
	if cfg.config != "" {
		var err error
		if file, err = agents.LoadFile(cfg.config); err != nil {
			return nil, err
		}
	}
	opts := agents.RegistryOptions{
		ModelOverride: cfg.model, DemoDelay: cfg.demoDelay, Logger: log,
		TracerProvider: tel.tracerProvider, MeterProvider: tel.meterProvider, RecordContent: cfg.recordContent,
	}
	reg, err := agents.NewRegistry(file, opts)
	if err != nil {
		return nil, err
	}
	key, err := service.LoadContinuationKey(cfg.key, cfg.keyFile)
	if err != nil {
		reg.Close()
		return nil, err
	}
	st, err := openStore(cfg)
	if err != nil {
		reg.Close()
		return nil, err
	}
	d := &daemon{agents: reg, health: health.NewServer(), store: st}
	sc := serviceLimits(cfg)
	sc.Agents, sc.Health, sc.Logger, sc.ContinuationKey, sc.Store = reg, d.health, log, key, st
	if d.Server, err = service.New(sc); err != nil {
		reg.Close()
		st.Close()
		return nil, err
	}
	return d, nil
}

// register installs on gs the AgentService, the health service and server reflection
// (v1 and v1alpha, so that grpcurl needs no proto files), and reports the whole server
// ("") SERVING; the service reports agentd.v1.AgentService itself.
func (d *daemon) register(gs *grpc.Server) {
	healthpb.RegisterHealthServer(gs, d.health)
	reflection.Register(gs)
	d.Register(gs)
	d.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
}

// shutdown turns every health status NOT_SERVING, so that load balancers stop sending
// work here, then shuts the service down (service.Server.Shutdown).
func (d *daemon) shutdown(ctx context.Context, period time.Duration) error {
	d.health.Shutdown()
	return d.Shutdown(ctx, period)
}

// close stops the agents' MCP servers and closes their remote hook connections.
// close ends the runs still going (they outlive their streams), closes the agents and
// then the store.
func (d *daemon) close() error {
	d.Shutdown(context.Background(), 0)
	return errors.Join(d.agents.Close(), d.store.Close())
}

// serviceLimits returns the service's limits from the flags, with the identity its
// per-caller limits key on: the caller's token or client certificate ([limitKey]), so
// that anonymous callers share no limit unless --limit-by-peer-ip. Logs name callers by
// callerOf, anonymous ones too.
func serviceLimits(cfg config) service.Config {
	return service.Config{
		MaxConcurrentRuns:       cfg.maxRuns,
		MaxRunsPerCaller:        cfg.maxRunsPerCaller,
		MaxAttachmentsPerRun:    cfg.maxAttachPerRun,
		MaxAttachmentsPerCaller: cfg.maxAttachPerCaller,
		// 0 turns a flag's cap off, and means the default in service.Config.
		MaxParkedRuns:           int(parkedCap(int64(cfg.maxParkedRuns))),
		MaxParkedRunsPerCaller:  int(parkedCap(int64(cfg.maxParkedRunsPerCaller))),
		MaxParkedBytes:          parkedCap(cfg.maxParkedBytes),
		MaxParkedBytesPerCaller: parkedCap(cfg.maxParkedBytesPerCaller),
		Caller:                  func(ctx context.Context) string { return limitKey(ctx, cfg.limitByPeerIP) },
		// Runs belong to a bearer token or client certificate; an anonymous caller's to
		// whoever knows the run's id. A peer address vouches for nobody.
		Identity: func(ctx context.Context) string { return limitKey(ctx, false) },
		// The transcript a start carries is bounded by the message size an operator allows.
		MaxTranscriptBytes: cfg.maxMessageBytes,
		RunRetention:       cfg.runRetention,
		ParkTimeout:        cfg.parkTimeout,
		ParkAfter:          parkAfter(cfg.parkAfter),
		ExactDeltas:        cfg.exactDeltas,
		Replica:            cfg.replicaID,
		LeaseTTL:           cfg.leaseTTL,
		ThreadRetention:    cfg.threadRetention,
		StartTimeout:       cfg.startTimeout,
		StallTimeout:       cfg.stallTimeout,
		MaxApprovalTimeout: cfg.maxApprovalTimeout,
	}
}

// parkedCap is a --max-parked flag as service.Config takes it: 0 there means the
// default, and no cap is negative.
func parkedCap(v int64) int64 {
	if v == 0 {
		return -1
	}
	return v
}

// parkAfter is --park-after as service.Config takes it: 0 there means the default, and
// never parking with a stream attached is negative.
func parkAfter(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
