package runs

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/continuation"
	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/memory"
)

// Manager is the run engine apart from the streams: the runs this server runs, their
// store and journal writer, parking, the fleet, threads and grants. Package service is
// its wire: it checks requests at the door, starts and attaches through a Manager, and
// maps its errors to gRPC statuses.
type Manager struct {
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
	// (Hooks.TraceContext).
	traceContext func(context.Context) (context.Context, []trace.Link)
	// check is the wire's check of a client message after start (checkInput): the
	// refusal the run acks it with, or nil.
	check func(*agentdv1.RunRequest) *agentdv1.RunError

	// admitMu is read-held while a run is counted in runs, and held while draining
	// starts: no run is counted once Drain has returned, so Shutdown's Wait never
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

// Hooks are what the engine calls of the wire that serves it.
type Hooks struct {
	// Drained is called once, as draining starts (health turns NOT_SERVING).
	Drained func()
	// TraceContext returns the context a run's span starts from, given its RPC's, and
	// the links the span carries.
	TraceContext func(context.Context) (context.Context, []trace.Link)
	// CheckInput is the wire's check of a client message after start: the refusal the
	// run acks it with, or nil for a message the run may act on.
	CheckInput func(*agentdv1.RunRequest) *agentdv1.RunError
}

// New returns the engine that runs agents, as cfg says (its zero fields take their
// defaults), logging to log (nil: slog.Default()) and calling h. It starts the store's
// sweeper and, with a shared store, the fleet's heartbeat; Shutdown stops them.
func New(cfg Config, agents Agents, log *slog.Logger, h Hooks) (*Manager, error) {
	if agents == nil {
		return nil, errors.New("runs: no agents")
	}
	if log == nil {
		log = slog.Default()
	}
	if h.Drained == nil {
		h.Drained = func() {}
	}
	if h.TraceContext == nil {
		h.TraceContext = func(ctx context.Context) (context.Context, []trace.Link) { return ctx, nil }
	}
	if h.CheckInput == nil {
		h.CheckInput = func(*agentdv1.RunRequest) *agentdv1.RunError { return nil }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxConcurrentRuns <= 0 {
		cfg.MaxConcurrentRuns = 1024
	}
	if cfg.MaxDepth <= 0 {
		cfg.MaxDepth = DefaultMaxDepth
	}
	if cfg.MaxChildren <= 0 {
		cfg.MaxChildren = DefaultMaxChildren
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
		log.Warn("no continuation key configured: a random one is used, so parked runs resume only on this process (set AGENTD_CONTINUATION_KEY on every replica)")
	}
	s := &Manager{
		cfg:    cfg,
		log:    log,
		agents: agents,
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
		Gated: s.gated, LeaseTTL: cfg.LeaseTTL, Log: log,
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
	s.drained, s.traceContext, s.check = h.Drained, h.TraceContext, h.CheckInput
	s.startFleet()
	return s, nil
}

func (s *Manager) now() time.Time { return s.cfg.Now() }

// Drain starts draining: new runs are refused, and every open stream is told how
// long its run has (period); Server.Drain says the rest. Idempotent.
func (s *Manager) Drain(period time.Duration) {
	s.drainOnce.Do(func() {
		s.drainUntil.Store(s.now().Add(period).UnixNano())
		s.log.Info("draining: the service is NOT_SERVING, new runs are refused", "period", period.String())
		s.admitMu.Lock()
		s.drainCancel()
		s.admitMu.Unlock()
		s.drained()
	})
}

// Draining reports whether Drain was called: new runs are refused.
func (s *Manager) Draining() bool { return s.drainCtx.Err() != nil }

func (s *Manager) drainDeadline() time.Time { return time.Unix(0, s.drainUntil.Load()) }

// Shutdown drains (Drain) and waits for the runs in progress to end, up to period,
// then shuts the rest down; Server.Shutdown says the rest.
func (s *Manager) Shutdown(ctx context.Context, period time.Duration) error {
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
func (s *Manager) ActiveRuns() int { return int(s.active.Load()) }
