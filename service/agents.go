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
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.yaml.in/yaml/v3"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/demo"
	"github.com/agentd/agentd/runtime/llm/workload"
	"github.com/agentd/agentd/runtime/tool/builtin"
	"github.com/agentd/agentd/runtime/tool/mcp"
)

// AgentsConfig is the agents file (agentd --config, AGENTD_CONFIG): the agents a server
// offers. [LoadAgentsFile] reads one; [DefaultAgentsConfig] is what a server offers
// without one. A config is plain data: [NewRegistry] checks it and builds the agents.
type AgentsConfig struct {
	// DefaultAgent names the agent a run gets when it names none; empty means the first.
	DefaultAgent string `yaml:"default_agent,omitempty"`
	// Agents are the agents, at least one.
	Agents []AgentConfig `yaml:"agents"`
	// MCPServers are the MCP servers agents may take tools from (AgentConfig.MCPServers).
	// [NewRegistry] starts or reaches those that some agent names, and only those.
	MCPServers []MCPServerConfig `yaml:"mcp_servers,omitempty"`

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
	// save_note, http_fetch (source "builtin"; http_fetch needs HTTPFetch), echo, add
	// (source "workload"). Nil (the field left out) means the model's tools: echo and add
	// for a workload model, current_time, calculate and save_note for any other. An empty
	// list (tools: []) means no tools. The tools of MCPServers come on top.
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
	// MCPServers names servers of the file's mcp_servers whose tools the agent has too,
	// after its catalogue tools, in order. A tool keeps its MCP name unless it clashes
	// with one of the agent's catalogue tools or with a tool of another of its servers;
	// then it is "<server>__<tool>". When a server's tools change, the agent is built
	// again; runs already going keep the tools they started with.
	MCPServers []string `yaml:"mcp_servers,omitempty"`
	// HTTPFetch configures the http_fetch tool; an agent that names http_fetch in Tools
	// needs it, with at least one allowed host.
	HTTPFetch *HTTPFetchConfig `yaml:"http_fetch,omitempty"`
	// MaxToolOutputBytes bounds the bytes of a tool's output the model reads (text or
	// JSON); a longer output is cut, with a note saying so. 0 means 64 KiB; -1 means no
	// limit.
	MaxToolOutputBytes int `yaml:"max_tool_output_bytes,omitempty"`
}

// HTTPFetchConfig configures an agent's http_fetch tool.
type HTTPFetchConfig struct {
	// AllowHosts are the hosts the tool may fetch from, redirects included: host names
	// ("example.com"), "*.example.com" for every subdomain of example.com (not
	// example.com itself), IP addresses, each optionally with ":port", and CIDR
	// prefixes ("10.0.0.0/8"). Loopback, private, link-local and other internal
	// addresses, whether a URL names them or a listed name resolves to them, are reached
	// only where an IP or CIDR entry names them (a cloud metadata address only by an
	// entry of its own). Required.
	AllowHosts []string `yaml:"allow_hosts"`
	// MaxBytes is how much of a body is read before it is cut; 0 means 1 MiB. The
	// agent's max_tool_output_bytes still bounds what the model reads.
	MaxBytes int64 `yaml:"max_bytes,omitempty"`
	// Timeout bounds one fetch, redirects and body included; 0 means 10s.
	Timeout Duration `yaml:"timeout,omitempty"`
}

// PolicyConfig is an agent's tool policy.
type PolicyConfig struct {
	// Approval is the approval of every tool not named in Tools, and of client tools:
	// "auto" (the default), "ask" or "always". A catalogue tool that asks for approval
	// by itself (save_note, http_fetch) keeps asking unless Tools names it; so does an
	// MCP tool whose annotations do not mark it read-only (see package
	// runtime/tool/mcp), or whose server's approval asks.
	Approval string `yaml:"approval,omitempty"`
	// Tools sets the policy of single tools, by name; they must be the agent's tools,
	// from the catalogue or, under the names the agent exposes them as, from its MCP
	// servers. An entry replaces the tool's own approval (when it names one).
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
		reflect.TypeFor[MCPServerConfig](), reflect.TypeFor[HTTPFetchConfig](),
		reflect.TypeFor[HooksConfig](), reflect.TypeFor[ModelSettings](),
		reflect.TypeFor[RemoteHookConfig](), reflect.TypeFor[RemoteHookTLSConfig](),
		reflect.TypeFor[LoopDetectConfig](), reflect.TypeFor[BudgetConfig](),
		reflect.TypeFor[ErrorBreakerConfig](), reflect.TypeFor[AuditConfig](),
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
	servers := c.checkMCPServers(add)
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
			// The names of MCP tools are known once the servers are connected:
			// NewRegistry checks them then.
			if catalogue[t] == nil && len(a.MCPServers) == 0 {
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
		if a.Settings.IdleTimeout < 0 {
			add(c.errorf(i, cfgPath{"settings", "idle_timeout"}, "must not be negative, got %s", a.Settings.IdleTimeout))
		}
		if a.MaxToolOutputBytes < -1 {
			add(c.errorf(i, cfgPath{"max_tool_output_bytes"}, "must be -1 (no limit), 0 (the default, 64 KiB) or positive, got %d", a.MaxToolOutputBytes))
		}
		dupServer := map[string]bool{}
		for k, name := range a.MCPServers {
			_, declared := servers[name]
			switch {
			case !declared:
				add(c.errorf(i, cfgPath{"mcp_servers", k}, "no mcp server named %q in the file's mcp_servers (%s)", name, describe(c.mcpServerNames())))
			case dupServer[name]:
				add(c.errorf(i, cfgPath{"mcp_servers", k}, "mcp server %q listed twice", name))
			}
			dupServer[name] = true
		}
		c.checkHTTPFetch(i, add)
	}
	if d := c.DefaultAgent; d != "" && len(c.Agents) > 0 {
		if _, ok := seen[d]; !ok {
			add(c.errorf(-1, cfgPath{"default_agent"}, "no agent named %q; agents: %s", d, strings.Join(c.names(), ", ")))
		}
	}
	return errs
}

// checkHTTPFetch checks agent i's http_fetch tool and its config, which go together.
func (c *AgentsConfig) checkHTTPFetch(i int, add func(error)) {
	a := c.Agents[i]
	named := slices.Contains(a.Tools, builtin.HTTPFetchName)
	hf := a.HTTPFetch
	switch {
	case named && (hf == nil || len(hf.AllowHosts) == 0):
		add(c.errorf(i, cfgPath{"tools", slices.Index(a.Tools, builtin.HTTPFetchName)},
			"http_fetch needs the hosts it may fetch from: add http_fetch: {allow_hosts: [example.com, \"*.example.com\"]} to the agent"))
	case hf != nil && !named:
		add(c.errorf(i, cfgPath{"http_fetch"}, "http_fetch is configured but not among the agent's tools; add it to tools"))
	}
	if hf == nil {
		return
	}
	if _, err := builtin.HTTPFetch(hf.AllowHosts); err != nil {
		add(c.errorf(i, cfgPath{"http_fetch", "allow_hosts"}, "%v", err))
	}
	if hf.MaxBytes < 0 {
		add(c.errorf(i, cfgPath{"http_fetch", "max_bytes"}, "must not be negative, got %d", hf.MaxBytes))
	}
	if hf.Timeout < 0 {
		add(c.errorf(i, cfgPath{"http_fetch", "timeout"}, "must not be negative, got %s", hf.Timeout))
	}
}

func (c *AgentsConfig) mcpServerNames() []string {
	names := make([]string, 0, len(c.MCPServers))
	for _, s := range c.MCPServers {
		names = append(names, s.Name)
	}
	return names
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

// agentState is what an agent's tools share, across rebuilds: save_note's store, and the
// http_fetch tool made from the agent's config.
type agentState struct {
	notes *builtin.Notes
	fetch runtime.Tool
}

var catalogueOrder = []string{builtin.CurrentTimeName, builtin.CalculateName, builtin.SaveNoteName, builtin.HTTPFetchName, "echo", "add"}

var catalogue = map[string]*catalogueTool{
	builtin.CurrentTimeName: {source: "builtin", make: func(*agentState) runtime.Tool { return builtin.CurrentTime() }},
	builtin.CalculateName:   {source: "builtin", make: func(*agentState) runtime.Tool { return builtin.Calculate() }},
	builtin.SaveNoteName: {
		source:   "builtin",
		approval: builtin.Policy().For(builtin.SaveNoteName).Approval,
		make:     func(s *agentState) runtime.Tool { return builtin.SaveNote(s.notes) },
	},
	builtin.HTTPFetchName: {
		source:   "builtin",
		approval: builtin.Policy().For(builtin.HTTPFetchName).Approval,
		make:     func(s *agentState) runtime.Tool { return s.fetch },
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
	// Logger is every agent's logger, and the MCP servers'; nil means slog.Default().
	Logger *slog.Logger
	// Hooks, if not nil, are every agent's own hooks (runtime.Config.Hooks), before the
	// hooks of its agents file entry (AgentConfig.Hooks).
	Hooks runtime.Hooks
	// PostHooks, if not nil, run after every agent's own hooks, the last of a run's
	// hooks: the place of a hook that must see what all the others decided, such as a
	// server-wide audit (a hook answers or denies a call in BeforeTool, where only the
	// hooks before audit's have spoken).
	PostHooks runtime.Hooks
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

// Registry holds the agents a server offers. It is safe for concurrent use; callers must
// not modify the entries it returns.
//
// An entry never changes once returned. When an MCP server says its tools changed, the
// registry builds the agents that use it again and swaps the new entries in at once:
// later calls of [Registry.Agent] return them, while a run that already took an entry
// keeps its tools. [Registry.Close] stops the MCP servers and closes the remote hook
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

// agentSet is one version of the registry's agents; it is never modified once stored.
type agentSet struct {
	agents []*AgentEntry // by name
	byName map[string]*AgentEntry
	def    string // the default agent's name
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
	// Tools are the agent's server tools, in order, with their policies: the catalogue
	// tools first, then those of its MCP servers.
	Tools []ToolInfo
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

// ToolInfo describes one server tool of an agent, as ListAgents shows it.
type ToolInfo struct {
	// Spec is the tool's spec, as the runtime holds it.
	Spec runtime.ToolSpec
	// Source is where the tool comes from: "builtin", "workload", or "mcp:<server>" for
	// a tool of the MCP server of that name.
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
// It resolves every agent's model, so an unknown model is an error here. It connects to
// every MCP server an agent names, bounded by RegistryOptions.MCPConnectTimeout: a server
// that cannot be started, reached or listed is an error naming it, and so is a
// policy.tools entry naming a tool that neither the catalogue nor the agent's servers
// offer. On error nothing is left running. cfg is not modified and not retained.
func NewRegistry(cfg *AgentsConfig, opts RegistryOptions) (*Registry, error) {
	if cfg == nil {
		cfg = DefaultAgentsConfig()
	}
	if errs := cfg.check(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	resolve := opts.Resolve
	if resolve == nil {
		resolve = NewModelResolver(append(BuiltinModelProviders(opts.DemoDelay), ProviderModelProviders()...)...)
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
func (r *Registry) build(cfg *AgentsConfig, resolve ModelResolver, opts RegistryOptions) error {
	defIdx := cfg.defaultIndex()
	set := &agentSet{byName: map[string]*AgentEntry{}, def: cfg.Agents[defIdx].Name}
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
		e, unknown, err := b.assemble()
		if err != nil {
			errs = append(errs, cfg.errorf(i, nil, "%v", err))
			continue
		}
		if len(unknown) > 0 {
			names := make([]string, len(e.Tools))
			for k, ti := range e.Tools {
				names[k] = ti.Spec.Name
			}
			for _, name := range unknown {
				errs = append(errs, cfg.errorf(i, cfgPath{"policy", "tools", name}, "tool %q is not one of the agent's tools (%s)", name, describe(names)))
			}
			continue
		}
		r.models[cmp.Or(override, cfg.Agents[i].Model)] = e.Runtime.Model()
		r.models[e.Model] = e.Runtime.Model()
		set.byName[e.Name] = e
		set.agents = append(set.agents, e)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	slices.SortFunc(set.agents, func(a, b *AgentEntry) int { return strings.Compare(a.Name, b.Name) })
	r.set.Store(set)
	return nil
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
		e, unknown, err := b.assemble()
		if err != nil {
			r.log.Error("agent not rebuilt after the tools of its mcp server changed: it keeps its tools", "agent", b.name, "mcp_server", server, "error", err)
			continue
		}
		if len(unknown) > 0 {
			r.log.Warn("agent's policy names tools it no longer has", "agent", b.name, "mcp_server", server, "tools", unknown)
		}
		next.byName[e.Name] = e
		rebuilt = true
		r.log.Info("agent rebuilt: the tools of its mcp server changed", "agent", e.Name, "mcp_server", server, "tools", len(e.Tools))
	}
	if !rebuilt {
		return
	}
	next.agents = slices.SortedFunc(maps.Values(next.byName), func(a, b *AgentEntry) int { return strings.Compare(a.Name, b.Name) })
	r.set.Store(next)
}

// agentBuilder builds one agent: in NewRegistry, and again whenever the tools of one of
// its MCP servers change. What does not depend on those tools (the model, the hooks,
// the catalogue tools and their state) is made once, here, and shared by every build.
type agentBuilder struct {
	name, description  string
	allowModelOverride bool
	serverNames        []string
	policyTools        map[string]ToolPolicyConfig
	def                runtime.Approval

	names     []string // the catalogue tools
	tools     []runtime.Tool
	sources   []*mcp.Source
	closers   []func() error // the remote hook connections
	rtConfig  runtime.Config // all but the tools and the policy
	timeout   time.Duration  // the agent's tool timeout in effect
	parallels int
}

// newBuilder prepares agent i, on the model override if one is given.
func (c *AgentsConfig) newBuilder(i int, override string, resolve ModelResolver, opts RegistryOptions, sources map[string]*mcp.Source) (*agentBuilder, error) {
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

	def, _ := parseApproval(a.Policy.Approval)
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

	agentHooks, closers, err := a.Hooks.build(opts.Logger)
	if err != nil {
		return nil, c.errorf(i, cfgPath{"hooks"}, "%v", err)
	}
	var hs []runtime.Hooks
	for _, h := range []runtime.Hooks{opts.Hooks, agentHooks, opts.PostHooks} {
		if h != nil {
			hs = append(hs, h)
		}
	}
	var hooks runtime.Hooks
	switch len(hs) {
	case 0:
	case 1:
		hooks = hs[0]
	default:
		hooks = runtime.Chain(opts.Logger, hs...)
	}
	return &agentBuilder{
		name:               a.Name,
		description:        a.Description,
		allowModelOverride: a.AllowModelOverride,
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
			Settings:      a.Settings.callSettings(),
			Logger:        opts.Logger,

			TracerProvider: opts.TracerProvider,
			MeterProvider:  opts.MeterProvider,
			RecordContent:  opts.RecordContent,
		},
	}, nil
}

// assemble builds the agent from its catalogue tools and the tools its MCP servers
// offer now. It returns, sorted, the names of policy.tools entries that name none of
// the agent's tools.
func (b *agentBuilder) assemble() (*AgentEntry, []string, error) {
	mcpTools, mcpPolicy := mcp.Merge(b.names, b.sources...)
	tools := append(slices.Clone(b.tools), mcpTools...)
	policy := runtime.Policy{Default: runtime.ToolPolicy{Approval: b.def}, Tools: map[string]runtime.ToolPolicy{}}
	source := map[string]string{}
	for _, name := range b.names {
		ct := catalogue[name]
		tp := runtime.ToolPolicy{Approval: max(ct.approval, b.def)}
		if pc, ok := b.policyTools[name]; ok {
			tp.Disabled = pc.Disabled
			if pc.Approval != "" {
				tp.Approval, _ = parseApproval(pc.Approval)
			}
		}
		policy.Tools[name] = tp
		source[name] = ct.source
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

	cfg := b.rtConfig
	cfg.Tools, cfg.Policy = tools, policy
	rt, err := runtime.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	e := &AgentEntry{
		Name:               b.name,
		Description:        b.description,
		Model:              b.rtConfig.Model.Name(),
		AllowModelOverride: b.allowModelOverride,
		Runtime:            rt,
	}
	for _, spec := range rt.Tools() {
		e.Tools = append(e.Tools, ToolInfo{
			Spec:     spec,
			Source:   source[spec.Name],
			Policy:   policy.For(spec.Name),
			Timeout:  cmp.Or(spec.Timeout, b.timeout),
			Parallel: spec.Parallel && b.parallels > 1,
		})
	}
	return e, unknown, nil
}

// Agent returns the named agent; "" names the default agent. An unknown name gets an
// error that wraps [ErrAgentNotFound] and lists the agents.
func (r *Registry) Agent(name string) (*AgentEntry, error) {
	set := r.set.Load()
	if name == "" {
		return set.byName[set.def], nil
	}
	if e, ok := set.byName[name]; ok {
		return e, nil
	}
	names := make([]string, len(set.agents))
	for i, e := range set.agents {
		names[i] = e.Name
	}
	return nil, fmt.Errorf("%w: %q; agents: %s", ErrAgentNotFound, name, strings.Join(names, ", "))
}

// Agents returns every agent, sorted by name. The slice is the caller's.
func (r *Registry) Agents() []*AgentEntry { return slices.Clone(r.set.Load().agents) }

// Default returns the default agent.
func (r *Registry) Default() *AgentEntry {
	set := r.set.Load()
	return set.byName[set.def]
}

// ResolveModel returns the model spec names, for a client's model override; whether the
// agent allows one is the caller's to check ([AgentEntry.AllowModelOverride]). The
// agents' own models are reused; other specs go to the registry's resolver.
func (r *Registry) ResolveModel(spec string) (runtime.Model, error) {
	if m, ok := r.models[spec]; ok {
		return m, nil
	}
	return r.resolve(spec)
}
