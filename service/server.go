package service

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/continuation"
	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/memory"
)

// Config configures a [Server]. Zero values take the defaults named on each field.
type Config struct {
	// Agents are the agents served; required. [NewAgents] makes a fixed set from agents
	// defined in Go; package service/agents builds them from agentd's agents file.
	Agents Agents
	// Health, if set, is the health service the Server reports its own service on
	// (agentd.v1.AgentService): SERVING from [Server.Register], NOT_SERVING from
	// [Server.Drain]. The Server neither registers it nor touches any other name: the
	// whole server's status ("") and the other services' are the caller's.
	Health *health.Server
	// Logger receives the server's structured logs. Nil means slog.Default().
	Logger *slog.Logger
	// ContinuationKey signs continuations; every replica that may resume a run must share
	// it. Nil means a random key: parked runs then resume only on this process.
	ContinuationKey []byte
	// ContinuationTTL is how long a continuation stays valid; 0 means 24 hours.
	ContinuationTTL time.Duration
	// MaxConcurrentRuns bounds the runs in progress; past it new runs get
	// RESOURCE_EXHAUSTED. 0 means 1024.
	MaxConcurrentRuns int
	// MaxClientTools bounds the client tools one run may declare; 0 means 64.
	MaxClientTools int
	// MaxClientSchemaBytes bounds the JSON Schemas of a run's client tools together, in
	// bytes of their JSON text: compiling a schema costs time in proportion to its size,
	// and every start compiles its client tools' schemas. Each schema is also bounded on
	// its own by the limits of runtime.CompileSchema. 0 means 256 KiB.
	MaxClientSchemaBytes int
	// MaxTranscriptBytes bounds the size of a start's transcript: its messages (as
	// encoded on the wire) and its input. A larger one is refused with INVALID_ARGUMENT
	// naming the limit. 0 means 2 MiB: more than the context window of most models, less
	// than gRPC's default 4 MiB message limit. A server that raises the message limit
	// (grpc.MaxRecvMsgSize) for long resumed transcripts raises this one too.
	MaxTranscriptBytes int
	// MaxRunsPerCaller bounds the runs in progress of one caller (see Caller), so that
	// one caller cannot take every slot of MaxConcurrentRuns; past it its new runs get
	// RESOURCE_EXHAUSTED. 0 means no limit per caller.
	MaxRunsPerCaller int
	// MaxAttachmentsPerRun bounds the streams attached to one run at once (AttachRun,
	// Run streams that attach, the one that started it), and MaxAttachmentsPerCaller
	// those of one caller, to any runs: each holds a goroutine and a cursor into the
	// journal. One past either is refused RESOURCE_EXHAUSTED (TOO_MANY_ATTACHMENTS). 0
	// means 64 a run and 256 a caller; an anonymous caller has no per-caller limit.
	MaxAttachmentsPerRun    int
	MaxAttachmentsPerCaller int
	// InputAnswerTimeout bounds how long a SendRunInput for a run another replica runs
	// waits for that replica's answer: past it the call ends UNAVAILABLE
	// (INPUT_UNANSWERED), the input stored for the run's holder, and a retry with the
	// same client_key gets its answer. 0 means 15 seconds.
	InputAnswerTimeout time.Duration
	// MaxRunInputBytes bounds the SendRunInput inputs of one run this server holds, as
	// sent, from when they come until they are answered (each is stored whole until
	// then): one past it is refused RESOURCE_EXHAUSTED (TOO_MANY_INPUTS) before it is
	// stored. A single input is never refused for it: the message size bounds that. 0
	// means 8 MiB.
	MaxRunInputBytes int
	// Caller names who makes an RPC, from its context: per-caller limits and per-caller
	// state (Request.Caller, which tools such as save_note keep notes apart by) key on
	// it. An empty name is anonymous: no per-caller limit applies to it. Nil means every
	// caller is anonymous.
	Caller func(ctx context.Context) string
	// Identity names who owns the runs an RPC starts, from its context: only that
	// identity may attach to them, send them input or resume their continuations, and a
	// run of an empty identity is anyone's who knows its id. Nil means Caller.
	Identity func(ctx context.Context) string
	// Store keeps runs, their journals and threads; nil means a memory store with its
	// default bounds (memory.New), gone with the process. The Server does not close it.
	Store store.Store
	// Replica names this process among those sharing Store: the holder of the leases on
	// the runs it runs. "" means the host name and a random suffix.
	Replica string
	// LeaseTTL is how long a run's lease lasts unless renewed (every third of it): with
	// a store several replicas share, how long a run of a replica that died waits
	// before another takes it up. 0 means 10 seconds.
	LeaseTTL time.Duration
	// RunRetention is how long a finished run, and its journal, is kept for the
	// clients that attach to it; 0 means 24 hours.
	RunRetention time.Duration
	// ThreadRetention is how long a thread nobody adds to is kept; 0 means 30 days.
	ThreadRetention time.Duration
	// ParkAfter is how long a run waits for an answer from the Run streams attached to
	// it (the one that started it, or others) before it parks in the store all the same,
	// with nothing of it running until the answer comes; 0 means 30 seconds, negative
	// never (it waits, live, as long as a stream that can answer is attached). With no
	// such stream attached it parks at once.
	ParkAfter time.Duration
	// ParkTimeout is how long a run parked in the store (its client gone, under
	// ON_DISCONNECT_CONTINUE) waits for the input it needs before it ends EXPIRED; 0
	// means 24 hours.
	ParkTimeout time.Duration
	// MaxParkedRuns and MaxParkedBytes bound the runs this server holds parked and the
	// bytes of their checkpoints, which stay in the store (in memory with a memory store)
	// for up to ParkTimeout; MaxParkedRunsPerCaller and MaxParkedBytesPerCaller bound one
	// caller's share of them (see Caller; an anonymous caller has none). A run that would
	// park past any of them ends AWAITING_INPUT instead, with the continuation its client
	// resumes it from, as a run whose client went away did before runs parked. 0 means
	// 4×MaxConcurrentRuns runs and 256 MiB, and a quarter of each per caller; negative
	// means no limit.
	MaxParkedRuns           int
	MaxParkedRunsPerCaller  int
	MaxParkedBytes          int64
	MaxParkedBytesPerCaller int64
	// StartTimeout bounds how long a Run stream may stay open without its start message;
	// past it the stream ends DEADLINE_EXCEEDED. 0 means 30 seconds.
	StartTimeout time.Duration
	// ExactDeltas keeps every delta the model streams an event of its own, for a client
	// that is behind too. By default consecutive deltas of one block (text, reasoning, a
	// call's arguments) that no stream has taken yet merge into one event, in the journal
	// too: a client that keeps up sees every delta as it comes, one behind gets fewer,
	// larger ones, and the server marshals, stores and sends less. Delta boundaries carry
	// no meaning either way.
	ExactDeltas bool
	// StallTimeout bounds how long a stream's client may read nothing while agentd has
	// an event to send it (gRPC flow control holds the send): past it the stream is let
	// go (RESOURCE_EXHAUSTED, CLIENT_STALLED) and the run goes on, or, under
	// ON_DISCONNECT_CANCEL, the run ends FAILED (CLIENT_STALLED) with its transcript and
	// the RPC ends with that outcome. 0 means 2 minutes.
	StallTimeout time.Duration
	// SteerRate and SteerBurst bound a run's steers (a token bucket); 0 means 5 a second
	// with bursts of 10.
	SteerRate  float64
	SteerBurst int
	// MaxQueuedSteers and MaxQueuedSteerBytes bound the steers a run holds that it has
	// not applied yet (while it waits on an approval, say), across the stretches of a
	// run that parks and wakes; a steer past either is refused in its ack, naming the
	// limit. 0 means 16 steers and 1 MiB; more than 2 MiB is taken as 2 MiB, so that a
	// parked run's steers fit its continuation. A SendRunInput steer larger than
	// MaxQueuedSteerBytes is refused before it is stored.
	MaxQueuedSteers     int
	MaxQueuedSteerBytes int
	// MessageRate and MessageBurst bound every client message of a Run stream after
	// start, whatever its kind (pings included): a token bucket per stream. A message
	// past it is refused in its ack. 0 means 50 a second with bursts of 100.
	MessageRate  float64
	MessageBurst int
	// ApprovalTimeout is how long an approval waits under APPROVAL_POLICY_ASK when the
	// client names none; 0 means 10 minutes, or MaxApprovalTimeout if that is shorter.
	ApprovalTimeout time.Duration
	// MaxApprovalTimeout is the longest approval_timeout a client may ask for; a longer
	// one is refused with INVALID_ARGUMENT. 0 means 24 hours.
	MaxApprovalTimeout time.Duration
	// ClientToolTimeout is how long a client tool call waits for its result when the
	// client names none; 0 means 5 minutes, or MaxClientToolTimeout if that is shorter.
	ClientToolTimeout time.Duration
	// MaxClientToolTimeout is the longest timeout a client may give one of its tools; a
	// longer one is refused with INVALID_ARGUMENT. 0 means 1 hour.
	MaxClientToolTimeout time.Duration
	// HeartbeatInterval is the silence after which a stream gets a heartbeat; 0 means 15 s.
	HeartbeatInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Propagator reads the trace context a caller sends in the RPC's metadata, so that a
	// run joins the caller's trace; nil means otel.GetTextMapPropagator().
	Propagator propagation.TextMapPropagator
}

// Server implements agentdv1.AgentServiceServer. It is safe for concurrent use.
type Server struct {
	agentdv1.UnimplementedAgentServiceServer
	*manager

	healthMu sync.Mutex // orders Register's SERVING before Drain's NOT_SERVING
}

// manager is the run engine apart from the streams: the runs this server runs, their
// store and journal writer, parking, the fleet, threads and grants. Server is its wire.
type manager struct {
	cfg    Config
	log    *slog.Logger
	agents Agents
	codec  *continuation.Codec

	active    atomic.Int64   // runs in progress
	runs      sync.WaitGroup // one per run in progress
	callers   counts         // runs in progress per caller
	attachers counts         // streams attached per caller
	inputs    counts         // bytes of SendRunInput inputs not yet answered, per run
	// parkedLoad counts the runs parked here and their checkpoints' bytes (parklimits.go).
	parkedLoad parkedLoad

	// drained, called once as draining starts, tells the wire (health).
	drained func()
	// traceContext is the context a run's span starts from, from the RPC's
	// (Server.runTraceContext).
	traceContext func(context.Context) (context.Context, []trace.Link)

	// admitMu is read-held while a run is counted in runs, and held while draining
	// starts: no run is counted once Drain has returned, so Shutdown's runs.Wait never
	// races an Add (a WaitGroup must not be added to from zero while it is waited on).
	admitMu   sync.RWMutex
	drainOnce sync.Once
	drainCtx  context.Context // done when draining starts
	// streamsCtx is done once a shutdown's runs are over: the streams still attached
	// then (to parked runs, or runs going on elsewhere) end (serveAttached).
	streamsCtx  context.Context
	endStreams  context.CancelCauseFunc
	drainCancel context.CancelFunc
	drainUntil  atomic.Int64 // unix nanos when running runs are shut down
	stopRuns    context.Context
	stopCancel  context.CancelCauseFunc

	// The store, its journal writer and sweeper, and the runs this server runs (runs.go).
	store        store.Store
	gated        bool // the store keeps frames on disk: streams send only what it has
	writer       *journal.Writer
	sweepMu      sync.Mutex
	sweeper      *time.Timer
	sweepStopped bool
	liveMu       sync.Mutex
	live         map[string]*session

	// The fleet (fleet.go): leases on the runs this server runs, and, with a store
	// other replicas share, taking up theirs.
	shared       bool // other replicas share the store
	fleetCtx     context.Context
	fleetStop    context.CancelFunc
	fleetDone    sync.WaitGroup
	takeoverOnce sync.Once
	takes        singleflight.Group // runs being taken up, by id (takeUp)
	nudges       nudges
	follows      *follows // the reads of runs followed from the store (follow.go)
	// started is when the server was made: its age, against other replicas'
	// (heartbeat); wakeDefer is wakeAfter's.
	started   time.Time
	wakeDefer atomic.Int64
	// writeFailed and writeDone are when the store last failed, and last took, a write
	// of a run's events (unix nanoseconds).
	writeFailed, writeDone atomic.Int64

	pumpMu  sync.Mutex
	pumping map[string]bool // runs whose stored inputs are being acted on; true: look again
	kicked  map[*session]struct{}
	kick    chan struct{}
}

// New returns a Server. Its one required field is cfg.Agents.
func New(cfg Config) (*Server, error) {
	if cfg.Agents == nil {
		return nil, errors.New("service: Config.Agents is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxConcurrentRuns <= 0 {
		cfg.MaxConcurrentRuns = 1024
	}
	if cfg.InputAnswerTimeout <= 0 {
		cfg.InputAnswerTimeout = 15 * time.Second
	}
	if cfg.MaxRunInputBytes <= 0 {
		cfg.MaxRunInputBytes = 8 << 20
	}
	if cfg.MaxAttachmentsPerRun <= 0 {
		cfg.MaxAttachmentsPerRun = 64
	}
	if cfg.MaxAttachmentsPerCaller <= 0 {
		cfg.MaxAttachmentsPerCaller = 256
	}
	if cfg.MaxClientTools <= 0 {
		cfg.MaxClientTools = 64
	}
	if cfg.MaxClientSchemaBytes <= 0 {
		cfg.MaxClientSchemaBytes = 256 << 10
	}
	if cfg.MaxTranscriptBytes <= 0 {
		cfg.MaxTranscriptBytes = 2 << 20
	}
	if cfg.SteerRate <= 0 {
		cfg.SteerRate = 5
	}
	if cfg.SteerBurst <= 0 {
		cfg.SteerBurst = 10
	}
	if cfg.MaxQueuedSteers <= 0 {
		cfg.MaxQueuedSteers = 16
	}
	if cfg.MaxQueuedSteerBytes <= 0 {
		cfg.MaxQueuedSteerBytes = 1 << 20
	}
	if cfg.MaxQueuedSteerBytes > continuation.MaxSize/2 {
		// A parked run's steers are in its continuation, which must fit its bound with
		// the rest of the run's pending step: a park that failed for it lost the run.
		cfg.MaxQueuedSteerBytes = continuation.MaxSize / 2
	}
	if cfg.MessageRate <= 0 {
		cfg.MessageRate = 50
	}
	if cfg.MessageBurst <= 0 {
		cfg.MessageBurst = 100
	}
	if cfg.RunRetention <= 0 {
		cfg.RunRetention = 24 * time.Hour
	}
	if cfg.ParkAfter == 0 {
		cfg.ParkAfter = 30 * time.Second
	}
	if cfg.ParkTimeout <= 0 {
		cfg.ParkTimeout = 24 * time.Hour
	}
	if cfg.ThreadRetention <= 0 {
		cfg.ThreadRetention = 30 * 24 * time.Hour
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 10 * time.Second
	}
	if cfg.Replica == "" {
		cfg.Replica = defaultReplica()
	}
	if cfg.Store == nil {
		cfg.Store = memory.New(memory.Options{Now: cfg.Now})
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = 2 * time.Minute
	}
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = 10 * time.Minute
	}
	if cfg.MaxApprovalTimeout <= 0 {
		cfg.MaxApprovalTimeout = 24 * time.Hour
	}
	if cfg.ClientToolTimeout <= 0 {
		cfg.ClientToolTimeout = 5 * time.Minute
	}
	if cfg.MaxClientToolTimeout <= 0 {
		cfg.MaxClientToolTimeout = time.Hour
	}
	// The defaults stay within the limits a client is held to.
	cfg.ApprovalTimeout = min(cfg.ApprovalTimeout, cfg.MaxApprovalTimeout)
	cfg.ClientToolTimeout = min(cfg.ClientToolTimeout, cfg.MaxClientToolTimeout)
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 15 * time.Second
	}
	key := cfg.ContinuationKey
	if len(key) == 0 {
		var err error
		if key, _, err = continuation.Key("", ""); err != nil {
			return nil, err
		}
		cfg.Logger.Warn("no continuation key configured: a random one is used, so parked runs resume only on this process (set AGENTD_CONTINUATION_KEY on every replica)")
	}
	srv := &Server{}
	s := &manager{
		cfg:    cfg,
		log:    cfg.Logger,
		agents: cfg.Agents,
		codec:  continuation.NewCodec(key, cfg.ContinuationTTL, cfg.Now),
		store:  cfg.Store,
		live:   map[string]*session{},
		kick:   make(chan struct{}, 1),
	}
	s.parkedLoad.limits = parkLimitsOf(&cfg)
	_, volatile := cfg.Store.(*memory.Store)
	s.gated = !volatile
	if sh, ok := cfg.Store.(interface{ Shared() bool }); ok {
		s.shared = sh.Shared()
	}
	s.writer = journal.NewWriter(cfg.Store, journal.WriterConfig{
		Gated: s.gated, LeaseTTL: cfg.LeaseTTL, Log: cfg.Logger,
		Wrote: func(ok bool) {
			if ok {
				s.writeDone.Store(time.Now().UnixNano())
			} else {
				s.writeFailed.Store(time.Now().UnixNano())
			}
		},
		Lost:    func(r journal.Run) { s.lostRun(r.(*session)) },
		Refused: func(r journal.Run, err error) { s.storeRefused(r.(*session), err) },
		GiveUp:  func(r journal.Run) { s.storeLost(r.(*session)) },
	})
	s.follows = newFollows(s)
	s.started = time.Now()
	s.wakeDefer.Store(int64(deferWake))
	s.drainCtx, s.drainCancel = context.WithCancel(context.Background())
	s.streamsCtx, s.endStreams = context.WithCancelCause(context.Background())
	s.stopRuns, s.stopCancel = context.WithCancelCause(context.Background())
	s.sweeper = time.AfterFunc(sweepInterval, s.sweep)
	s.drained = func() { srv.setHealth(healthpb.HealthCheckResponse_NOT_SERVING) }
	s.traceContext = srv.runTraceContext
	srv.manager = s
	s.startFleet()
	return srv, nil
}

func (s *manager) now() time.Time { return s.cfg.Now() }

// Register installs the AgentService on gs, and nothing else: gs may hold the caller's
// own services, health and reflection among them. With [Config.Health] it reports
// agentd.v1.AgentService SERVING there, unless the Server drains already. Call it once,
// before gs.Serve. Build gs with [ServerOptions].
func (s *Server) Register(gs *grpc.Server) {
	agentdv1.RegisterAgentServiceServer(gs, s)
	s.setHealth(healthpb.HealthCheckResponse_SERVING)
}

// setHealth reports st for agentd.v1.AgentService on Config.Health, if there is one. Once
// the server drains it reports NOT_SERVING alone.
func (s *Server) setHealth(st healthpb.HealthCheckResponse_ServingStatus) {
	if s.cfg.Health == nil {
		return
	}
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	if s.isDraining() {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	s.cfg.Health.SetServingStatus(agentdv1.AgentService_ServiceDesc.ServiceName, st)
}

// Drain starts a graceful shutdown: agentd.v1.AgentService turns NOT_SERVING on
// [Config.Health] so load balancers stop sending runs here, new runs are refused with
// UNAVAILABLE, and every open stream gets a go_away event saying how long its run has
// before it is shut down (period). Drain is idempotent; see [Server.Shutdown].
func (s *manager) Drain(period time.Duration) {
	s.drainOnce.Do(func() {
		s.drainUntil.Store(s.now().Add(period).UnixNano())
		s.log.Info("draining: the service is NOT_SERVING, new runs are refused", "period", period.String())
		s.admitMu.Lock()
		s.drainCancel()
		s.admitMu.Unlock()
		s.drained()
	})
}

func (s *manager) isDraining() bool { return s.drainCtx.Err() != nil }

func (s *manager) drainDeadline() time.Time { return time.Unix(0, s.drainUntil.Load()) }

// Shutdown drains the server (see [Server.Drain]) and waits for the runs in progress to
// finish, up to period. Runs still going then end SHUTDOWN, each with a continuation
// that any replica sharing the continuation key resumes. Shutdown returns when every run
// has ended, or when ctx is done.
func (s *manager) Shutdown(ctx context.Context, period time.Duration) error {
	s.Drain(period)
	s.sweepMu.Lock()
	s.sweepStopped = true
	s.sweeper.Stop()
	s.sweepMu.Unlock()
	s.stopParked()
	defer s.stopFleet()
	// Once the runs are over, the streams still attached end too, a moment later (the
	// streams of runs that just finished send their last events meanwhile): else the
	// gRPC server's graceful stop waits for them until the process's timeout.
	defer time.AfterFunc(attachedGrace, func() { s.endStreams(errShuttingDown) })
	done := make(chan struct{})
	go func() {
		s.runs.Wait()
		close(done)
	}()
	timer := time.NewTimer(period)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-timer.C:
	case <-ctx.Done():
	}
	if n := s.active.Load(); n > 0 {
		s.log.Info("drain period over: shutting down the runs in progress", "runs", n)
	}
	s.stopCancel(runtime.ErrShutdown)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errShuttingDown ends the streams still attached when a shutdown's runs are over.
var errShuttingDown = errors.New("the server is shutting down")

// attachedGrace is how long after a shutdown's runs are over the streams still attached
// are ended.
const attachedGrace = 500 * time.Millisecond

// counts counts what each key holds: the runs in progress of a caller, the streams it
// has attached, the bytes of a run's unanswered inputs. It is safe for concurrent use;
// a key that holds nothing takes no memory, and an empty key is never counted.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

// add counts n more for key, unless key holds something already and n more would pass
// limit: one thing alone is always counted, however large.
func (c *counts) add(key string, n, limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key] > 0 && c.n[key]+n > limit {
		return false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key] += n
	return true
}

// held returns what key holds.
func (c *counts) held(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// sub uncounts n that add counted for key; an empty key was not counted.
func (c *counts) sub(key string, n int) {
	if key == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key] -= n; c.n[key] <= 0 {
		delete(c.n, key)
	}
}

// ActiveRuns returns the number of runs in progress.
func (s *manager) ActiveRuns() int { return int(s.active.Load()) }

// GracefulStop stops gs gracefully: it stops accepting connections and waits for open RPCs
// to finish, but no longer than ctx allows. When ctx is done first, it closes every
// connection and open RPC at once (grpc.Server.Stop). It returns ctx.Err() in that case and
// nil when every RPC finished in time.
func GracefulStop(ctx context.Context, gs *grpc.Server) error {
	done := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		gs.Stop()
		<-done
		return ctx.Err()
	}
}

// LoadContinuationKey returns the continuation signing key from value (the
// AGENTD_CONTINUATION_KEY variable: at least 32 bytes, used as they are, or
// "base64:…" or "hex:…") or else from the named file. With neither it returns nil, and
// [New] then makes a random key.
func LoadContinuationKey(value, file string) ([]byte, error) {
	if value == "" && file == "" {
		return nil, nil
	}
	key, _, err := continuation.Key(value, file)
	return key, err
}
