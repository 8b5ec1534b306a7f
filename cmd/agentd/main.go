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

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/agentd/agentd/hooks"
	"github.com/agentd/agentd/hooks/audit"
	"github.com/agentd/agentd/internal/version"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/runs"
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
	maxRunDepth        int
	maxChildren        int
	maxTreeTokens      int64
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
// from its AGENTD_* variable. It writes the usage to stderr for -h and --help alone; any
// other mistake is the error it returns, one line each.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var cfg config
	fs, showVersion := newFlagSet(&cfg)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stderr, fs)
			return config{}, err
		}
		return config{}, flagError(fs, err)
	}
	if *showVersion {
		return config{}, errVersion
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q: agentd takes flags only (run agentd --help for them)", fs.Args())
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
				errs = append(errs, fmt.Errorf("invalid value %q for %s: %w", v, name, err))
			}
			set[f.Name] = true
		}
	})
	// A value that did not parse left its flag as it was: the checks below would judge
	// the flags on values no one gave, so only the values are reported.
	if len(errs) > 0 {
		return config{}, errors.Join(errs...)
	}
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

// envName is the environment variable that stands in for the flag name.
func envName(flagName string) string {
	return "AGENTD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	h := logHandler(cfg.logFormat, stderr, &slog.HandlerOptions{Level: cfg.logLevel})
	// In text logs, for a person, agentd first says in a line where it serves and what;
	// the records of its start (a warning on the continuation key, say) wait until then.
	var announce func(startup)
	if logFormat(cfg.logFormat, stderr) == "text" {
		var release func()
		h, release = holdLogs(h)
		defer release()
		announce = func(s startup) {
			fmt.Fprintln(stderr, s)
			release()
		}
	}
	log := slog.New(traceHandler{h})
	lis, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	return serveAnnounced(ctx, cfg, lis, log, announce)
}

// serve runs agentd on lis until ctx is done, then shuts down gracefully: health turns
// NOT_SERVING, streams get go_away, runs get cfg.drainPeriod to finish and then end
// SHUTDOWN with a continuation, and whatever is still open after cfg.shutdownTimeout is
// closed.
func serve(ctx context.Context, cfg config, lis net.Listener, log *slog.Logger) error {
	return serveAnnounced(ctx, cfg, lis, log, nil)
}

// serveAnnounced is serve that, when announce is not nil, calls it with where agentd
// serves once its listeners are open, before it logs that they are.
func serveAnnounced(ctx context.Context, cfg config, lis net.Listener, log *slog.Logger, announce func(startup)) error {
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
	if announce != nil {
		announce(newStartup(srv, cfg, lis, hs, httpLis))
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
		StartTimeout: cfg.startTimeout,
		Config: runs.Config{
			MaxConcurrentRuns:       cfg.maxRuns,
			MaxRunsPerCaller:        cfg.maxRunsPerCaller,
			MaxDepth:                cfg.maxRunDepth,
			MaxChildren:             cfg.maxChildren,
			MaxTreeTokens:           cfg.maxTreeTokens,
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
			StallTimeout:       cfg.stallTimeout,
			MaxApprovalTimeout: cfg.maxApprovalTimeout,
		},
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
