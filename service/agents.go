package service

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.yaml.in/yaml/v3"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/demo"
	"github.com/agentd/agentd/runtime/llm/workload"
	"github.com/agentd/agentd/runtime/tool/builtin"
)

// AgentsConfig is the agents file (agentd --config, AGENTD_CONFIG): the agents a server
// offers. [LoadAgentsFile] reads one; [DefaultAgentsConfig] is what a server offers
// without one. A config is plain data: [NewRegistry] checks it and builds the agents.
type AgentsConfig struct {
	// DefaultAgent names the agent a run gets when it names none; empty means the first.
	DefaultAgent string `yaml:"default_agent,omitempty"`
	// Agents are the agents, at least one.
	Agents []AgentConfig `yaml:"agents"`

	// Where the config was read from, so that errors found later name the line.
	path string
	root *yaml.Node
}

// AgentConfig declares one agent. Fields left empty take the defaults of the agent's
// model, its "natural setup" (see Tools, System and MaxSteps).
type AgentConfig struct {
	// Name is how clients name the agent: unique, matching ^[a-z0-9][a-z0-9_-]{0,63}$.
	Name string `yaml:"name"`
	// Description says what the agent is for; ListAgents shows it.
	Description string `yaml:"description,omitempty"`
	// Model is the model spec, "provider:model": "demo" (or "demo:agentd-demo"),
	// "workload:small|medium|large", and whatever else the registry's [ModelResolver]
	// knows. Required, unless the agent is the default one and a model override is set.
	Model string `yaml:"model"`
	// System is the system prompt. Empty means the model's: the workload's prompt for a
	// workload model; for any other model a prompt describing the built-in tools, when
	// Tools is nil too; otherwise none.
	System string `yaml:"system,omitempty"`
	// Tools names the agent's tools from the catalogue: current_time, calculate,
	// save_note (source "builtin"), echo, add (source "workload"). Nil (the field left
	// out) means the model's tools: echo and add for a workload model, the three built-in
	// tools for any other. An empty list (tools: []) means no tools.
	Tools []string `yaml:"tools,omitempty"`
	// Policy says which tools may be called and which calls need an approval.
	Policy PolicyConfig `yaml:"policy,omitempty"`
	// MaxSteps bounds the steps of one turn; 0 means the model's (S+1 for a workload
	// model, so that a replay can finish) or the runtime's default of 25.
	MaxSteps int `yaml:"max_steps,omitempty"`
	// ParallelTools is how many calls of one step may run at once; 0 or 1 runs them one
	// after another.
	ParallelTools int `yaml:"parallel_tools,omitempty"`
	// ToolTimeout bounds a call of a tool that names no timeout of its own; 0 means one
	// minute.
	ToolTimeout Duration `yaml:"tool_timeout,omitempty"`
	// AllowModelOverride lets a client name another model for its run
	// (RunConfig.model), resolved by [Registry.ResolveModel].
	AllowModelOverride bool `yaml:"allow_model_override,omitempty"`
	// Hooks enables and tunes the agent's built-in and remote hooks.
	Hooks HooksConfig `yaml:"hooks,omitempty"`
	// BaseURL is the provider's server for this agent (an OpenAI-compatible server such
	// as Ollama, vLLM or OpenRouter); empty means OPENAI_BASE_URL / ANTHROPIC_BASE_URL.
	BaseURL string `yaml:"base_url,omitempty"`
	// APIKeyEnv names the environment variable holding this agent's key; empty means
	// OPENAI_API_KEY / ANTHROPIC_API_KEY. Keys never appear in the file.
	APIKeyEnv string `yaml:"api_key_env,omitempty"`
	// Settings tunes the agent's model calls.
	Settings ModelSettings `yaml:"settings,omitempty"`
	// FallbackModels are tried in order when the model fails before it streams anything
	// and its retries are spent.
	FallbackModels []string `yaml:"fallback_models,omitempty"`
}

// PolicyConfig is an agent's tool policy.
type PolicyConfig struct {
	// Approval is the approval of every tool not named in Tools, and of client tools:
	// "auto" (the default), "ask" or "always". A catalogue tool that asks for approval
	// by itself (save_note) keeps asking unless Tools names it.
	Approval string `yaml:"approval,omitempty"`
	// Tools sets the policy of single tools, by name; they must be the agent's tools.
	Tools map[string]ToolPolicyConfig `yaml:"tools,omitempty"`
}

// ToolPolicyConfig is the policy of one tool.
type ToolPolicyConfig struct {
	// Disabled tools are not offered to the model; their calls get an error result.
	Disabled bool `yaml:"disabled,omitempty"`
	// Approval is "auto", "ask" or "always" (see [runtime.Approval]); empty means the
	// agent's default approval.
	Approval string `yaml:"approval,omitempty"`
}

// Duration is a time.Duration written in YAML as a Go duration string ("30s", "1m30s").
type Duration time.Duration

// String returns the duration as time.Duration formats it.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: invalid duration %q: want a duration such as 30s, 2m or 1m30s", n.Line, n.Value)}}
	}
	*d = Duration(v)
	return nil
}

// DefaultAgentsConfig returns the agents a server offers without an agents file: the
// built-in demo agent, "demo", on the demo model, with current_time, calculate and
// save_note (whose calls ask for an approval). With a model override
// ([RegistryOptions.ModelOverride]) it runs on that model; on a workload model its tools
// are the workload's echo and add.
func DefaultAgentsConfig() *AgentsConfig {
	return &AgentsConfig{
		DefaultAgent: "demo",
		Agents: []AgentConfig{{
			Name:        "demo",
			Description: "agentd's built-in demo agent: tells the time, calculates, and saves notes (saving asks for your approval).",
			Model:       "demo",
		}},
	}
}

// builtinSystem is the system prompt of an agent that takes the built-in tools by default.
const builtinSystem = "You are agentd's built-in demo agent. You can tell the current time in any IANA time zone " +
	"(current_time), evaluate arithmetic (calculate) and save short notes (save_note; saving asks the user " +
	"for approval first). Use a tool whenever it helps, and answer briefly."

// LoadAgentsFile reads and checks the agents file at path. Decoding is strict: an unknown
// field is an error. Every error names the file and line, and the agent and field at
// fault; all that are found are reported together. Models are resolved later, by
// [NewRegistry].
func LoadAgentsFile(path string) (*AgentsConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agents file: %w", err)
	}
	cfg, err := parseAgents(path, data)
	if err != nil {
		return nil, err
	}
	if errs := cfg.check(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

func parseAgents(path string, data []byte) (*AgentsConfig, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want a mapping with an agents list (and optionally default_agent)", path)
	}
	cfg := &AgentsConfig{path: path, root: doc.Content[0]}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		errs := make([]error, 0, len(te.Errors))
		for _, msg := range te.Errors {
			errs = append(errs, cfg.typeError(msg))
		}
		return nil, errors.Join(errs...)
	}
	var more yaml.Node
	if err := dec.Decode(&more); err != io.EOF {
		return nil, fmt.Errorf("%s: more than one YAML document; want one", path)
	}
	return cfg, nil
}

var (
	typeErrorRE  = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownField = regexp.MustCompile(`^field (\S+) not found in type (\S+)$`)
)

// typeError rewrites one of yaml's decoding errors to name the file, line, agent and
// field, and for an unknown field the fields that are known.
func (c *AgentsConfig) typeError(msg string) error {
	m := typeErrorRE.FindStringSubmatch(msg)
	if m == nil {
		return fmt.Errorf("%s: %s", c.path, msg)
	}
	line, _ := strconv.Atoi(m[1])
	msg = m[2]
	agent, path := c.pathAt(line)
	if u := unknownField.FindStringSubmatch(msg); u != nil {
		if len(path) > 0 {
			path = path[:len(path)-1] // the unknown key itself
		}
		msg = fmt.Sprintf("unknown field %q", u[1])
		if known := knownFields(u[2]); known != "" {
			msg += "; known fields: " + known
		}
	}
	return &configError{file: c.path, line: line, agent: c.agentName(agent), path: path, msg: msg}
}

// knownFields lists the YAML fields of the config type that Go names typeName.
func knownFields(typeName string) string {
	for _, t := range []reflect.Type{
		reflect.TypeFor[AgentsConfig](), reflect.TypeFor[AgentConfig](),
		reflect.TypeFor[PolicyConfig](), reflect.TypeFor[ToolPolicyConfig](),
	} {
		if t.String() != typeName {
			continue
		}
		var names []string
		for f := range t.Fields() {
			if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); f.IsExported() && name != "" && name != "-" {
				names = append(names, name)
			}
		}
		return strings.Join(names, ", ")
	}
	return ""
}

// A configError is a problem with one field of the config.
type configError struct {
	file  string
	line  int    // 0: unknown
	agent string // "" for the top level
	path  cfgPath
	msg   string
}

func (e *configError) Error() string {
	var b strings.Builder
	switch {
	case e.file != "" && e.line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.file, e.line)
	case e.file != "":
		fmt.Fprintf(&b, "%s: ", e.file)
	default:
		b.WriteString("agents config: ")
	}
	if e.agent != "" {
		b.WriteString(e.agent + ": ")
	}
	if len(e.path) > 0 {
		b.WriteString(e.path.String() + ": ")
	}
	b.WriteString(e.msg)
	return b.String()
}

// cfgPath is the path of a field: mapping keys (string) and sequence indexes (int).
type cfgPath []any

func (p cfgPath) String() string {
	var b strings.Builder
	for _, k := range p {
		switch k := k.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", k)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, k)
		}
	}
	return b.String()
}

// errorf reports a problem with a field of agent i (-1 for the top level).
func (c *AgentsConfig) errorf(i int, path cfgPath, format string, args ...any) error {
	return &configError{file: c.path, line: c.lineOf(i, path), agent: c.agentName(i), path: path, msg: fmt.Sprintf(format, args...)}
}

func (c *AgentsConfig) agentName(i int) string {
	switch {
	case i < 0 || i >= len(c.Agents):
		return ""
	case c.Agents[i].Name == "":
		return fmt.Sprintf("agents[%d]", i)
	}
	return fmt.Sprintf("agent %q", c.Agents[i].Name)
}

// agentNodes returns the nodes of the agents list, when the config came from a file.
func (c *AgentsConfig) agentNodes() []*yaml.Node {
	if n := mapValue(c.root, "agents"); n != nil && n.Kind == yaml.SequenceNode {
		return n.Content
	}
	return nil
}

// lineOf returns the line of agent i's field at path, or of the nearest node on the way
// there; 0 when the config did not come from a file.
func (c *AgentsConfig) lineOf(i int, path cfgPath) int {
	n := c.root
	if n == nil {
		return 0
	}
	if i >= 0 {
		nodes := c.agentNodes()
		if i >= len(nodes) {
			return n.Line
		}
		n = nodes[i]
	}
	for _, k := range path {
		var next *yaml.Node
		switch k := k.(type) {
		case int:
			if n.Kind == yaml.SequenceNode && k < len(n.Content) {
				next = n.Content[k]
			}
		case string:
			next = mapValue(n, k)
		}
		if next == nil {
			break
		}
		n = next
	}
	return n.Line
}

// pathAt finds the agent (-1: none) and the field path of the key on line.
func (c *AgentsConfig) pathAt(line int) (int, cfgPath) {
	for i, n := range c.agentNodes() {
		if n.Line <= line && line <= lastLine(n) {
			return i, keyAt(n, line, nil)
		}
	}
	return -1, keyAt(c.root, line, nil)
}

func keyAt(n *yaml.Node, line int, path cfgPath) cfgPath {
	switch n.Kind {
	case yaml.MappingNode:
		for j := 0; j+1 < len(n.Content); j += 2 {
			k, v := n.Content[j], n.Content[j+1]
			if k.Line == line {
				return append(path, k.Value)
			}
			if k.Line < line && line <= lastLine(v) {
				return keyAt(v, line, append(path, k.Value))
			}
		}
	case yaml.SequenceNode:
		for j, v := range n.Content {
			if v.Line <= line && line <= lastLine(v) {
				return keyAt(v, line, append(path, j))
			}
		}
	}
	return path
}

func lastLine(n *yaml.Node) int {
	last := n.Line
	for _, c := range n.Content {
		last = max(last, lastLine(c))
	}
	return last
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for j := 0; j+1 < len(n.Content); j += 2 {
		if n.Content[j].Value == key {
			return n.Content[j+1]
		}
	}
	return nil
}

var agentNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// check finds the problems that need no model: names, tools, policies, limits and the
// default agent.
func (c *AgentsConfig) check() []error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	if len(c.Agents) == 0 {
		add(c.errorf(-1, cfgPath{"agents"}, "no agents; declare at least one"))
	}
	seen := map[string]int{}
	for i, a := range c.Agents {
		switch {
		case a.Name == "":
			add(c.errorf(i, nil, "name: required"))
		case !agentNameRE.MatchString(a.Name):
			add(c.errorf(i, cfgPath{"name"}, "invalid name %q: want 1 to 64 lowercase letters, digits, '_' or '-', starting with a letter or digit", a.Name))
		}
		if j, dup := seen[a.Name]; dup && a.Name != "" {
			add(c.errorf(i, cfgPath{"name"}, "duplicate agent name %q: agents[%d] has it too", a.Name, j))
		} else {
			seen[a.Name] = i
		}
		dupTool := map[string]bool{}
		for k, t := range a.Tools {
			switch {
			case catalogue[t] == nil:
				add(c.errorf(i, cfgPath{"tools", k}, "unknown tool %q; known tools: %s", t, strings.Join(catalogueOrder, ", ")))
			case dupTool[t]:
				add(c.errorf(i, cfgPath{"tools", k}, "tool %q listed twice", t))
			}
			dupTool[t] = true
		}
		if _, err := parseApproval(a.Policy.Approval); err != nil {
			add(c.errorf(i, cfgPath{"policy", "approval"}, "%v", err))
		}
		for _, t := range slices.Sorted(maps.Keys(a.Policy.Tools)) {
			if catalogue[t] == nil {
				add(c.errorf(i, cfgPath{"policy", "tools", t}, "unknown tool %q; known tools: %s", t, strings.Join(catalogueOrder, ", ")))
			}
			if _, err := parseApproval(a.Policy.Tools[t].Approval); err != nil {
				add(c.errorf(i, cfgPath{"policy", "tools", t, "approval"}, "%v", err))
			}
		}
		if a.MaxSteps < 0 {
			add(c.errorf(i, cfgPath{"max_steps"}, "must not be negative, got %d", a.MaxSteps))
		}
		if a.ParallelTools < 0 {
			add(c.errorf(i, cfgPath{"parallel_tools"}, "must not be negative, got %d", a.ParallelTools))
		}
		if a.ToolTimeout < 0 {
			add(c.errorf(i, cfgPath{"tool_timeout"}, "must not be negative, got %s", a.ToolTimeout))
		}
	}
	if d := c.DefaultAgent; d != "" && len(c.Agents) > 0 {
		if _, ok := seen[d]; !ok {
			add(c.errorf(-1, cfgPath{"default_agent"}, "no agent named %q; agents: %s", d, strings.Join(c.names(), ", ")))
		}
	}
	return errs
}

func (c *AgentsConfig) names() []string {
	names := make([]string, 0, len(c.Agents))
	for _, a := range c.Agents {
		names = append(names, a.Name)
	}
	return names
}

func (c *AgentsConfig) defaultIndex() int {
	for i, a := range c.Agents {
		if a.Name == c.DefaultAgent {
			return i
		}
	}
	return 0
}

func parseApproval(s string) (runtime.Approval, error) {
	switch s {
	case "", "auto":
		return runtime.ApprovalAuto, nil
	case "ask":
		return runtime.ApprovalAsk, nil
	case "always":
		return runtime.ApprovalAlways, nil
	}
	return 0, fmt.Errorf("invalid approval %q: want auto, ask or always", s)
}

// The tool catalogue: every tool an agents file can name.

type catalogueTool struct {
	source string
	// approval is the tool's own approval: an agent's default approval never loosens it.
	approval runtime.Approval
	make     func(*agentState) runtime.Tool
}

// agentState is what an agent's tools share: save_note's store.
type agentState struct {
	notes *builtin.Notes
}

var catalogueOrder = []string{builtin.CurrentTimeName, builtin.CalculateName, builtin.SaveNoteName, "echo", "add"}

var catalogue = map[string]*catalogueTool{
	builtin.CurrentTimeName: {source: "builtin", make: func(*agentState) runtime.Tool { return builtin.CurrentTime() }},
	builtin.CalculateName:   {source: "builtin", make: func(*agentState) runtime.Tool { return builtin.Calculate() }},
	builtin.SaveNoteName: {
		source:   "builtin",
		approval: builtin.Policy().For(builtin.SaveNoteName).Approval,
		make:     func(s *agentState) runtime.Tool { return builtin.SaveNote(s.notes) },
	},
	"echo": {source: "workload", make: workloadTool("echo")},
	"add":  {source: "workload", make: workloadTool("add")},
}

func workloadTool(name string) func(*agentState) runtime.Tool {
	return func(*agentState) runtime.Tool {
		for _, t := range workload.Tools() {
			if t.Spec().Name == name {
				return t
			}
		}
		panic("service: the workload has no tool " + name)
	}
}

// Models.

// ErrUnknownModel is wrapped by the errors of resolvers made by [NewModelResolver] for a
// spec that names no model they know.
var ErrUnknownModel = errors.New("unknown model")

// ModelResolver returns the model a spec names. Specs read "provider:model"; a provider
// may also accept its name alone ("demo"). It must be safe for concurrent use, and so
// must the models it returns.
type ModelResolver func(spec string) (runtime.Model, error)

// ModelProvider makes the models of one provider, for [NewModelResolver].
type ModelProvider struct {
	// Name is the part of a spec before the colon: "demo", "workload", "openai".
	Name string
	// Forms lists the specs the provider accepts, for error messages:
	// "workload:small".
	Forms []string
	// New returns the model named by the part of the spec after "<Name>:", or "" for a
	// spec that is Name alone. Its error wraps [ErrUnknownModel] when the provider has no
	// such model.
	New func(model string) (runtime.Model, error)
}

// BuiltinModelProviders returns the providers built into agentd: "demo" (the demo model,
// streaming with demoDelay between deltas) and "workload" (the benchmark workload's
// replay, one model per size).
func BuiltinModelProviders(demoDelay time.Duration) []ModelProvider {
	var sizes []string
	for _, s := range workload.Sizes() {
		sizes = append(sizes, "workload:"+s.Name)
	}
	return []ModelProvider{
		{
			Name:  "demo",
			Forms: []string{"demo", demo.ModelName},
			New: func(model string) (runtime.Model, error) {
				if model != "" && "demo:"+model != demo.ModelName {
					return nil, fmt.Errorf("%w: the demo provider has one model, %s", ErrUnknownModel, demo.ModelName)
				}
				return demo.New(demo.Config{Delay: demoDelay}), nil
			},
		},
		{
			Name:  "workload",
			Forms: sizes,
			New: func(model string) (runtime.Model, error) {
				size, err := workload.Lookup(model)
				if err != nil {
					return nil, fmt.Errorf("%w: %v", ErrUnknownModel, err)
				}
				return workload.New(size), nil
			},
		},
	}
}

// laterProviders are providers agentd will have, named in errors until they are added.
var laterProviders = []string{"openai", "anthropic"}

// NewModelResolver returns a resolver that hands each spec to the provider its prefix
// names. A provider listed twice: the last one wins, so a caller can replace a built-in
// one. A spec that names no provider, or whose provider's error wraps [ErrUnknownModel],
// gets an error that wraps ErrUnknownModel and lists the supported forms.
func NewModelResolver(providers ...ModelProvider) ModelResolver {
	last := map[string]int{}
	for i, p := range providers {
		last[p.Name] = i
	}
	byName := map[string]ModelProvider{}
	var forms []string
	for i, p := range providers {
		if last[p.Name] == i && p.New != nil {
			byName[p.Name] = p
			forms = append(forms, p.Forms...)
		}
	}
	supported := "supported models: " + strings.Join(forms, ", ")
	var later []string
	for _, name := range laterProviders {
		if _, ok := byName[name]; !ok {
			later = append(later, name+":…")
		}
	}
	if len(later) > 0 {
		supported += " (" + strings.Join(later, " and ") + " arrive with the provider adapters)"
	}
	return func(spec string) (runtime.Model, error) {
		if spec == "" {
			return nil, fmt.Errorf("%w: no model named; %s", ErrUnknownModel, supported)
		}
		name, model, _ := strings.Cut(spec, ":")
		p, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("model %q: %w: no provider %q; %s", spec, ErrUnknownModel, name, supported)
		}
		m, err := p.New(model)
		switch {
		case errors.Is(err, ErrUnknownModel):
			return nil, fmt.Errorf("model %q: %w; %s", spec, err, supported)
		case err != nil:
			return nil, fmt.Errorf("model %q: %w", spec, err)
		}
		return m, nil
	}
}

// The registry.

// ErrAgentNotFound is wrapped by the error of [Registry.Agent] for a name no agent has.
var ErrAgentNotFound = errors.New("agent not found")

// RegistryOptions configures [NewRegistry].
type RegistryOptions struct {
	// ModelOverride (--model, AGENTD_MODEL) replaces the default agent's model. When that
	// agent leaves its tools out, it gets the new model's (echo and add for a workload
	// model).
	ModelOverride string
	// DemoDelay is the demo model's pause between deltas (see demo.Config).
	DemoDelay time.Duration
	// Resolve makes models from specs; nil means NewModelResolver(BuiltinModelProviders(DemoDelay)...).
	Resolve ModelResolver
	// Logger is every agent's logger; nil means slog.Default().
	Logger *slog.Logger
	// Hooks, if not nil, are every agent's own hooks (runtime.Config.Hooks).
	Hooks runtime.Hooks
	// TracerProvider, MeterProvider and RecordContent are every agent's telemetry
	// (runtime.Config); nil providers mean the global ones, and content stays off the
	// spans unless RecordContent is set.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	RecordContent  bool
}

// Registry holds the agents a server offers. It is immutable after [NewRegistry] and safe
// for concurrent use; callers must not modify the entries it returns.
type Registry struct {
	agents  []*AgentEntry // by name
	byName  map[string]*AgentEntry
	def     *AgentEntry
	models  map[string]runtime.Model // the agents' models, by spec and by name
	resolve ModelResolver
}

// AgentEntry is one agent of a [Registry].
type AgentEntry struct {
	Name, Description string
	// Model is the name of the agent's model, "provider:model" ("demo:agentd-demo",
	// "workload:medium").
	Model string
	// AllowModelOverride says whether a client may name another model for its run.
	AllowModelOverride bool
	// Runtime runs the agent.
	Runtime *runtime.Agent
	// Tools are the agent's server tools, in order, with their policies.
	Tools []ToolInfo

	closers []func() error // the agent's remote hook connections
}

// Close releases what the registry's agents hold: their remote hook connections.
func (r *Registry) Close() error {
	var errs []error
	for _, e := range r.agents {
		errs = append(errs, closeAll(e.closers))
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

// ToolInfo describes one server tool of an agent, as ListAgents shows it.
type ToolInfo struct {
	// Spec is the tool's spec, as the runtime holds it.
	Spec runtime.ToolSpec
	// Source is where the tool comes from: "builtin" or "workload".
	Source string
	// Policy is the tool's policy in the agent.
	Policy runtime.ToolPolicy
	// Timeout is the per-call timeout in effect: the spec's, or the agent's tool timeout.
	Timeout time.Duration
	// Parallel says whether calls may run alongside other calls of the same step: the
	// spec allows it and the agent runs more than one call at once.
	Parallel bool
}

// defaultToolTimeout is runtime.New's default for Config.ToolTimeout.
const defaultToolTimeout = time.Minute

// NewRegistry checks cfg and builds its agents; a nil cfg means [DefaultAgentsConfig].
// It resolves every agent's model, so an unknown model is an error here. cfg is not
// modified and not retained.
func NewRegistry(cfg *AgentsConfig, opts RegistryOptions) (*Registry, error) {
	if cfg == nil {
		cfg = DefaultAgentsConfig()
	}
	if errs := cfg.check(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	resolve := opts.Resolve
	if resolve == nil {
		resolve = NewModelResolver(append(BuiltinModelProviders(opts.DemoDelay), ProviderModelProviders()...)...)
	}
	r := &Registry{byName: map[string]*AgentEntry{}, models: map[string]runtime.Model{}, resolve: resolve}
	defIdx := cfg.defaultIndex()
	var errs []error
	for i := range cfg.Agents {
		override := ""
		if i == defIdx {
			override = opts.ModelOverride
		}
		e, err := cfg.build(i, override, resolve, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.models[cmp.Or(override, cfg.Agents[i].Model)] = e.Runtime.Model()
		r.models[e.Model] = e.Runtime.Model()
		r.byName[e.Name] = e
		r.agents = append(r.agents, e)
		if i == defIdx {
			r.def = e
		}
	}
	if len(errs) > 0 {
		r.Close()
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(r.agents, func(a, b *AgentEntry) int { return strings.Compare(a.Name, b.Name) })
	return r, nil
}

// build makes agent i, on the model override if one is given.
func (c *AgentsConfig) build(i int, override string, resolve ModelResolver, opts RegistryOptions) (*AgentEntry, error) {
	a := c.Agents[i]
	spec := cmp.Or(override, a.Model)
	if spec == "" {
		return nil, c.errorf(i, nil, "model: required (for example demo or workload:medium)")
	}
	model, err := a.resolveModel(spec, resolve)
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

	def, _ := parseApproval(a.Policy.Approval)
	policy := runtime.Policy{Default: runtime.ToolPolicy{Approval: def}, Tools: map[string]runtime.ToolPolicy{}}
	state := &agentState{notes: new(builtin.Notes)}
	tools := make([]runtime.Tool, 0, len(names))
	for _, name := range names {
		ct := catalogue[name]
		tools = append(tools, ct.make(state))
		tp := runtime.ToolPolicy{Approval: max(ct.approval, def)}
		if pc, ok := a.Policy.Tools[name]; ok {
			tp.Disabled = pc.Disabled
			if pc.Approval != "" {
				tp.Approval, _ = parseApproval(pc.Approval)
			}
		}
		policy.Tools[name] = tp
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(a.Policy.Tools)) {
		if !slices.Contains(names, name) {
			errs = append(errs, c.errorf(i, cfgPath{"policy", "tools", name}, "tool %q is not one of the agent's tools (%s)", name, strings.Join(names, ", ")))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	agentHooks, closers, err := a.Hooks.build(opts.Logger)
	if err != nil {
		return nil, c.errorf(i, cfgPath{"hooks"}, "%v", err)
	}
	var hooks runtime.Hooks
	switch {
	case opts.Hooks != nil && agentHooks != nil:
		hooks = runtime.Chain(opts.Logger, opts.Hooks, agentHooks)
	case agentHooks != nil:
		hooks = agentHooks
	default:
		hooks = opts.Hooks
	}
	rt, err := runtime.New(runtime.Config{
		Name:          a.Name,
		Model:         model,
		System:        system,
		Tools:         tools,
		Policy:        policy,
		Hooks:         hooks,
		MaxSteps:      maxSteps,
		ParallelTools: a.ParallelTools,
		ToolTimeout:   time.Duration(a.ToolTimeout),
		Settings:      a.Settings.callSettings(),
		Logger:        opts.Logger,

		TracerProvider: opts.TracerProvider,
		MeterProvider:  opts.MeterProvider,
		RecordContent:  opts.RecordContent,
	})
	if err != nil {
		closeAll(closers)
		return nil, c.errorf(i, nil, "%v", err)
	}
	timeout := cmp.Or(time.Duration(a.ToolTimeout), defaultToolTimeout)
	e := &AgentEntry{
		closers:            closers,
		Name:               a.Name,
		Description:        a.Description,
		Model:              model.Name(),
		AllowModelOverride: a.AllowModelOverride,
		Runtime:            rt,
	}
	for _, spec := range rt.Tools() {
		e.Tools = append(e.Tools, ToolInfo{
			Spec:     spec,
			Source:   catalogue[spec.Name].source,
			Policy:   policy.For(spec.Name),
			Timeout:  cmp.Or(spec.Timeout, timeout),
			Parallel: spec.Parallel && a.ParallelTools > 1,
		})
	}
	return e, nil
}

// Agent returns the named agent; "" names the default agent. An unknown name gets an
// error that wraps [ErrAgentNotFound] and lists the agents.
func (r *Registry) Agent(name string) (*AgentEntry, error) {
	if name == "" {
		return r.def, nil
	}
	if e, ok := r.byName[name]; ok {
		return e, nil
	}
	names := make([]string, len(r.agents))
	for i, e := range r.agents {
		names[i] = e.Name
	}
	return nil, fmt.Errorf("%w: %q; agents: %s", ErrAgentNotFound, name, strings.Join(names, ", "))
}

// Agents returns every agent, sorted by name. The slice is the caller's.
func (r *Registry) Agents() []*AgentEntry { return slices.Clone(r.agents) }

// Default returns the default agent.
func (r *Registry) Default() *AgentEntry { return r.def }

// ResolveModel returns the model spec names, for a client's model override; whether the
// agent allows one is the caller's to check ([AgentEntry.AllowModelOverride]). The
// agents' own models are reused; other specs go to the registry's resolver.
func (r *Registry) ResolveModel(spec string) (runtime.Model, error) {
	if m, ok := r.models[spec]; ok {
		return m, nil
	}
	return r.resolve(spec)
}
