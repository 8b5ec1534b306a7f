package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/workload"
	"github.com/agentd/agentd/runtime/tool/builtin"
	"github.com/agentd/agentd/runtime/tool/mcp"
	"github.com/agentd/agentd/service/runs"
)

// defaultToolTimeout is runtime.New's default for Config.ToolTimeout.
const defaultToolTimeout = time.Minute

// builtinSystem is the system prompt of an agent that takes the built-in tools by default.
const builtinSystem = "You are agentd's built-in demo agent. You can tell the current time in any IANA time zone " +
	"(current_time), evaluate arithmetic (calculate) and save short notes (save_note; saving asks the user " +
	"for approval first). Use a tool whenever it helps, and answer briefly."

// agentBuilder builds one agent: in NewRegistry, and again whenever the tools of one of
// its MCP servers change. What does not depend on those tools (the model, the hooks,
// the catalogue tools and their state) is made once, here, and shared by every build.
type agentBuilder struct {
	name, description  string
	allowModelOverride bool
	runOutputSchema    bool
	subagents          []runs.Subagent
	serverNames        []string
	policyTools        map[string]ToolPolicyConfig
	def                runtime.ToolPolicy // the policy's approval and max_grant

	names     []string // the catalogue tools
	tools     []runtime.Tool
	sources   []*mcp.Source
	closers   []func() error // the remote hook connections
	rtConfig  runtime.Config // all but the tools and the policy
	timeout   time.Duration  // the agent's tool timeout in effect
	parallels int
}

// newBuilder prepares agent i, on the model override if one is given.
func (c *Config) newBuilder(i int, override string, resolve ModelResolver, opts RegistryOptions, sources map[string]*mcp.Source) (*agentBuilder, error) {
	a := c.Agents[i]
	spec := cmp.Or(override, a.Model)
	if spec == "" {
		return nil, c.errorf(i, nil, "model: required (for example demo or workload:medium)")
	}
	model, err := a.resolveModel(spec, resolve, opts.Logger)
	if err != nil {
		if override != "" {
			return nil, fmt.Errorf("model override %q for the default agent %q: %w", override, a.Name, err)
		}
		return nil, &configError{file: c.path, line: c.lineOf(i, cfgPath{"model"}), agent: c.agentName(i), msg: err.Error()}
	}

	// The model's natural setup fills what the config leaves out.
	names, system, maxSteps := a.Tools, a.System, a.MaxSteps
	if wm, ok := model.(*workload.Model); ok {
		wc := workload.Config(wm.Size())
		if names == nil {
			names = []string{"echo", "add"}
		}
		system = cmp.Or(system, wc.System)
		maxSteps = cmp.Or(maxSteps, wc.MaxSteps)
	} else if names == nil {
		names = []string{builtin.CurrentTimeName, builtin.CalculateName, builtin.SaveNoteName}
		system = cmp.Or(system, builtinSystem)
	}

	var def runtime.ToolPolicy
	def.Approval, _ = parseApproval(a.Policy.Approval)
	def.MaxGrant, _ = parseGrant(a.Policy.MaxGrant)
	state := &agentState{notes: new(builtin.Notes)}
	if hf := a.HTTPFetch; hf != nil {
		state.fetch, err = builtin.HTTPFetch(hf.AllowHosts, builtin.WithFetchMaxBytes(hf.MaxBytes), builtin.WithFetchTimeout(time.Duration(hf.Timeout)))
		if err != nil {
			return nil, c.errorf(i, cfgPath{"http_fetch", "allow_hosts"}, "%v", err)
		}
	}
	tools := make([]runtime.Tool, 0, len(names))
	for _, name := range names {
		tools = append(tools, catalogue[name].make(state))
	}
	var srcs []*mcp.Source
	for _, name := range a.MCPServers {
		srcs = append(srcs, sources[name])
	}

	// The agent's own hooks are its agents file entry's alone: server-wide hooks come
	// with each run, from the server's interceptors (runtime.Request.Hooks).
	hooks, closers, err := a.Hooks.build(opts.Logger)
	if err != nil {
		return nil, c.errorf(i, cfgPath{"hooks"}, "%v", err)
	}
	outputMode, _ := parseOutputMode(a.OutputMode) // checked
	var outputSchema json.RawMessage
	if a.OutputSchema != nil {
		outputSchema = a.OutputSchema.JSON
	}
	return &agentBuilder{
		name:               a.Name,
		description:        a.Description,
		allowModelOverride: a.AllowModelOverride,
		runOutputSchema:    a.AllowRunOutputSchema,
		subagents:          c.subagents(i),
		serverNames:        slices.Clone(a.MCPServers),
		policyTools:        maps.Clone(a.Policy.Tools),
		def:                def,
		names:              slices.Clone(names),
		tools:              tools,
		sources:            srcs,
		closers:            closers,
		timeout:            cmp.Or(time.Duration(a.ToolTimeout), defaultToolTimeout),
		parallels:          a.ParallelTools,
		rtConfig: runtime.Config{
			Name:          a.Name,
			Model:         model,
			System:        system,
			Hooks:         hooks,
			MaxSteps:      maxSteps,
			ParallelTools: a.ParallelTools,
			ToolTimeout:   time.Duration(a.ToolTimeout),
			MaxToolOutput: a.MaxToolOutputBytes,

			OutputSchema:      outputSchema,
			OutputCorrections: a.OutputCorrections,
			OutputMode:        outputMode,
			Settings:          a.Settings.callSettings(),
			Logger:            opts.Logger,

			TracerProvider: opts.TracerProvider,
			MeterProvider:  opts.MeterProvider,
			RecordContent:  opts.RecordContent,
		},
	}, nil
}

// assemble builds the agent from its catalogue tools and the tools its MCP servers
// offer now. It returns, sorted, the names of policy.tools entries that name none of
// the agent's tools.
func (b *agentBuilder) assemble() (*runs.Agent, []string, error) {
	mcpTools, mcpPolicy := mcp.Merge(b.names, b.sources...)
	tools := append(slices.Clone(b.tools), mcpTools...)
	policy := runtime.Policy{Default: b.def, Tools: map[string]runtime.ToolPolicy{}}
	source := map[string]string{}
	for _, name := range b.names {
		ct := catalogue[name]
		tp := runtime.ToolPolicy{Approval: max(ct.approval, b.def.Approval), MaxGrant: b.def.MaxGrant}
		if pc, ok := b.policyTools[name]; ok {
			tp = pc.over(tp)
		}
		policy.Tools[name] = tp
		source[name] = ct.source
	}
	for _, sa := range b.subagents {
		// A child's start is a tool call like any: auto unless the policy says more.
		tp := runtime.ToolPolicy{Approval: b.def.Approval, MaxGrant: b.def.MaxGrant}
		if pc, ok := b.policyTools[sa.Tool]; ok {
			tp = pc.over(tp)
		}
		tools = append(tools, runs.SubagentTool(sa))
		policy.Tools[sa.Tool], source[sa.Tool] = tp, "agent:"+sa.Agent
	}
	for _, t := range mcpTools {
		name := t.Spec().Name
		var explicit *ToolPolicyConfig
		if pc, ok := b.policyTools[name]; ok {
			explicit = &pc
		}
		policy.Tools[name] = mcpToolPolicy(mcpPolicy.For(name), b.def, explicit)
		source[name] = mcpSource(t)
	}
	var unknown []string
	for _, name := range slices.Sorted(maps.Keys(b.policyTools)) {
		if _, ok := policy.Tools[name]; !ok {
			unknown = append(unknown, name)
		}
	}
	// Last, so that the tools above are still the sources' own (mcpSource needs them).
	for k, t := range tools {
		if pc, ok := b.policyTools[t.Spec().Name]; ok && pc.Idempotent != nil {
			tools[k] = withIdempotent(t, *pc.Idempotent)
		}
	}

	cfg := b.rtConfig
	cfg.Tools, cfg.Policy = tools, policy
	rt, err := runtime.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	a := &runs.Agent{Name: b.name, Description: b.description, Runtime: rt, Tools: []runs.ToolInfo{}, RunOutputSchema: b.runOutputSchema, Subagents: b.subagents}
	for _, spec := range rt.Tools() {
		a.Tools = append(a.Tools, runs.ToolInfo{
			Spec:     spec,
			Source:   source[spec.Name],
			Policy:   policy.For(spec.Name),
			Timeout:  cmp.Or(spec.Timeout, b.timeout),
			Parallel: spec.Parallel && b.parallels > 1,
		})
	}
	return a, unknown, nil
}

// over returns tp with what the entry names put over it: an entry that leaves out
// approval or max_grant keeps tp's. Disabled and GrantAnyArguments are the entry's.
// The entry has been checked.
func (pc ToolPolicyConfig) over(tp runtime.ToolPolicy) runtime.ToolPolicy {
	tp.Disabled = pc.Disabled
	if pc.Approval != "" {
		tp.Approval, _ = parseApproval(pc.Approval)
	}
	if pc.MaxGrant != "" {
		tp.MaxGrant, _ = parseGrant(pc.MaxGrant)
	}
	tp.GrantAnyArguments = pc.GrantAnyArguments
	return tp
}

// withIdempotent returns t with its spec's Idempotent set to idempotent
// (ToolPolicyConfig.Idempotent): t itself when it declares that already, otherwise a
// tool whose calls go to t. A tool that carries its compiled schema
// ([runtime.SchemaTool]) keeps carrying it, so the agent does not compile it again.
func withIdempotent(t runtime.Tool, idempotent bool) runtime.Tool {
	spec := t.Spec()
	if spec.Idempotent == idempotent {
		return t
	}
	spec.Idempotent = idempotent
	if st, ok := t.(runtime.SchemaTool); ok {
		return specSchemaTool{specTool{t, spec}, st}
	}
	return specTool{t, spec}
}

// specTool is a tool with a spec of the agents file's making; Execute is the tool's
// own. It is safe for concurrent use when the tool is.
type specTool struct {
	tool runtime.Tool
	spec runtime.ToolSpec
}

func (t specTool) Spec() runtime.ToolSpec { return t.spec }

func (t specTool) Execute(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
	return t.tool.Execute(ctx, call)
}

// specSchemaTool is a specTool of a [runtime.SchemaTool]. The spec's Parameters are the
// tool's, so the tool's Schema still compiles them.
type specSchemaTool struct {
	specTool
	schema runtime.SchemaTool
}

func (t specSchemaTool) Schema() *runtime.Schema { return t.schema.Schema() }
