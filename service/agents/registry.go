package agents

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/tool/mcp"
	"github.com/agentd/agentd/service/runs"
)

// RegistryOptions configures [NewRegistry].
type RegistryOptions struct {
	// ModelOverride (--model, AGENTD_MODEL) replaces the default agent's model. When that
	// agent leaves its tools out, it gets the new model's (echo and add for a workload
	// model).
	ModelOverride string
	// DemoDelay is the demo model's pause between deltas (see demo.Config).
	DemoDelay time.Duration
	// Resolve makes models from specs; nil means
	// NewModelResolver(append(BuiltinModelProviders(DemoDelay), HostedModelProviders()...)...).
	Resolve ModelResolver
	// Logger is every agent's logger, and the MCP servers'; nil means slog.Default().
	Logger *slog.Logger
	// TracerProvider, MeterProvider and RecordContent are every agent's telemetry
	// (runtime.Config); nil providers mean the global ones, and content stays off the
	// spans unless RecordContent is set.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	RecordContent  bool
	// MCPConnectTimeout bounds the connecting to the agents' MCP servers, which happens
	// for all of them at once: starting or reaching each, the handshake and the listing
	// of its tools. 0 means 30s.
	MCPConnectTimeout time.Duration
}

// Registry holds the agents of an agents file; it implements runs.Agents. It is safe
// for concurrent use; callers must not modify the agents it returns.
//
// An agent never changes once returned. When an MCP server says its tools changed, the
// registry builds the agents that use it again and swaps the new ones in at once: later
// calls of [Registry.Agent] return them, while a run that already took an agent keeps
// its tools. [Registry.Close] stops the MCP servers and closes the remote hook
// connections; call it once the server serves no more runs.
type Registry struct {
	set     atomic.Pointer[agentSet]
	models  map[string]runtime.Model // the agents' models, by spec and by name
	resolve ModelResolver
	log     *slog.Logger

	builders []*agentBuilder // in the file's order
	sources  map[string]*mcp.Source

	mu     sync.Mutex // held by NewRegistry while it builds, by rebuilds, and by Close to mark closed
	closed bool
}

var _ runs.Agents = (*Registry)(nil)

// agentSet is one version of the registry's agents; it is never modified once stored.
type agentSet struct {
	agents []*runs.Agent // by name
	byName map[string]*runs.Agent
	def    string // the default agent's name
}

// NewRegistry checks cfg and builds its agents; a nil cfg means [Default]. It resolves
// every agent's model, so an unknown model is an error here. It connects to every MCP
// server an agent names, bounded by RegistryOptions.MCPConnectTimeout: a server that
// cannot be started, reached or listed is an error naming it, and so is a policy.tools
// entry naming a tool that neither the catalogue nor the agent's servers offer. On error
// nothing is left running. cfg is not modified and not retained.
func NewRegistry(cfg *Config, opts RegistryOptions) (*Registry, error) {
	if cfg == nil {
		cfg = Default()
	}
	if errs := cfg.check(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	resolve := opts.Resolve
	if resolve == nil {
		resolve = NewModelResolver(append(BuiltinModelProviders(opts.DemoDelay), HostedModelProviders()...)...)
	}
	sources, err := cfg.connectMCP(opts)
	if err != nil {
		return nil, err
	}
	r := &Registry{models: map[string]runtime.Model{}, resolve: resolve, log: opts.Logger, sources: sources}
	// Listen before building: a change from now on rebuilds, and one before is in the
	// tools the first build reads.
	for name, src := range sources {
		src.OnToolsChanged(func() { r.toolsChanged(name) })
	}
	r.mu.Lock()
	err = r.build(cfg, resolve, opts)
	r.mu.Unlock()
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// build builds cfg's agents. r.mu is held.
func (r *Registry) build(cfg *Config, resolve ModelResolver, opts RegistryOptions) error {
	defIdx := cfg.defaultIndex()
	set := &agentSet{byName: map[string]*runs.Agent{}, def: cfg.Agents[defIdx].Name}
	var errs []error
	for i := range cfg.Agents {
		override := ""
		if i == defIdx {
			override = opts.ModelOverride
		}
		b, err := cfg.newBuilder(i, override, resolve, opts, r.sources)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.builders = append(r.builders, b)
		a, unknown, err := r.assemble(b)
		if err != nil {
			errs = append(errs, cfg.errorf(i, nil, "%v", err))
			continue
		}
		if len(unknown) > 0 {
			names := make([]string, len(a.Tools))
			for k, ti := range a.Tools {
				names[k] = ti.Spec.Name
			}
			for _, name := range unknown {
				errs = append(errs, cfg.errorf(i, cfgPath{"policy", "tools", name}, "tool %q is not one of the agent's tools (%s)", name, describe(names)))
			}
			continue
		}
		model := a.Runtime.Model()
		r.models[cmp.Or(override, cfg.Agents[i].Model)] = model
		r.models[model.Name()] = model
		set.byName[a.Name] = a
		set.agents = append(set.agents, a)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	slices.SortFunc(set.agents, byName)
	r.set.Store(set)
	return nil
}

func byName(a, b *runs.Agent) int { return strings.Compare(a.Name, b.Name) }

// assemble builds b's agent as the service serves it: a model override, when the agent
// allows one, goes to the registry's models.
func (r *Registry) assemble(b *agentBuilder) (*runs.Agent, []string, error) {
	a, unknown, err := b.assemble()
	if err != nil {
		return nil, nil, err
	}
	if b.allowModelOverride {
		a.Models = r.resolveModel
	}
	return a, unknown, nil
}

// toolsChanged builds the agents that use the MCP server again, and swaps them in. It
// runs on the server's source goroutine. An agent that cannot be built again keeps the
// tools it had, which is logged.
func (r *Registry) toolsChanged(server string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.set.Load()
	if r.closed || old == nil {
		return
	}
	next := &agentSet{byName: maps.Clone(old.byName), def: old.def}
	rebuilt := false
	for _, b := range r.builders {
		if !slices.Contains(b.serverNames, server) {
			continue
		}
		a, unknown, err := r.assemble(b)
		if err != nil {
			r.log.Error("agent not rebuilt after the tools of its mcp server changed: it keeps its tools", "agent", b.name, "mcp_server", server, "error", err)
			continue
		}
		if len(unknown) > 0 {
			r.log.Warn("agent's policy names tools it no longer has", "agent", b.name, "mcp_server", server, "tools", unknown)
		}
		next.byName[a.Name] = a
		rebuilt = true
		r.log.Info("agent rebuilt: the tools of its mcp server changed", "agent", a.Name, "mcp_server", server, "tools", len(a.Tools))
	}
	if !rebuilt {
		return
	}
	next.agents = slices.SortedFunc(maps.Values(next.byName), byName)
	r.set.Store(next)
}

// Agent returns the named agent; "" names the default agent. An unknown name gets an
// error that wraps runs.ErrAgentNotFound and lists the agents.
func (r *Registry) Agent(name string) (*runs.Agent, error) {
	set := r.set.Load()
	if name == "" {
		return set.byName[set.def], nil
	}
	if a, ok := set.byName[name]; ok {
		return a, nil
	}
	names := make([]string, len(set.agents))
	for i, a := range set.agents {
		names[i] = a.Name
	}
	return nil, fmt.Errorf("%w: %q; agents: %s", runs.ErrAgentNotFound, name, strings.Join(names, ", "))
}

// List returns every agent, sorted by name. The slice is the caller's.
func (r *Registry) List() []*runs.Agent { return slices.Clone(r.set.Load().agents) }

// resolveModel returns the model spec names, for a client's model override of an agent
// that allows one (AgentConfig.AllowModelOverride). The agents' own models are reused;
// other specs go to the registry's resolver.
func (r *Registry) resolveModel(spec string) (runtime.Model, error) {
	if m, ok := r.models[spec]; ok {
		return m, nil
	}
	return r.resolve(spec)
}

// Close stops the registry's MCP servers (ending their processes or their HTTP
// sessions) and closes its agents' remote hook connections. Calls of MCP tools made
// afterwards fail. Close is idempotent.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	// Not under mu: closing a source waits for its goroutine, which may be waiting for mu
	// to rebuild an agent (and will find the registry closed).
	closeSources(r.sources)
	var errs []error
	for _, b := range r.builders {
		errs = append(errs, closeAll(b.closers))
	}
	return errors.Join(errs...)
}

func closeAll(closers []func() error) error {
	var errs []error
	for _, c := range closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}
