package agents

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the agents file (agentd --config, AGENTD_CONFIG): the agents a server offers.
// [LoadFile] reads one; [Default] is what a server offers without one. A config is plain
// data: [NewRegistry] checks it and builds the agents.
type Config struct {
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
	// (RunConfig.model), resolved by the registry's [ModelResolver] (the agents' own
	// models are reused).
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
	// OutputSchema, when set, is the JSON Schema of the agent's result, its root an
	// object: the model answers by calling the tool final_answer with arguments that
	// match it (after its other tools, if it needs them), and run_finished.output
	// carries the answer. Written as YAML or as a string of JSON.
	OutputSchema *SchemaConfig `yaml:"output_schema,omitempty"`
	// OutputCorrections is how many answers that do not match OutputSchema (or come as
	// text) the model may correct before the run ends FAILED with OUTPUT_INVALID; 0
	// means 2, -1 none.
	OutputCorrections int `yaml:"output_corrections,omitempty"`
	// OutputMode says how the model gives its answer: "auto" (the default) asks the
	// provider for JSON matching the schema where it can (OpenAI's response_format)
	// and offers final_answer otherwise; "tool" always offers final_answer; "native"
	// requires the provider's way.
	OutputMode string `yaml:"output_mode,omitempty"`
	// AllowRunOutputSchema lets a client ask a run for a typed result of its own
	// (RunConfig.output_schema); on an agent with an OutputSchema, an answer must then
	// match both. False, the default, refuses such a run (OUTPUT_SCHEMA_NOT_ALLOWED).
	AllowRunOutputSchema bool `yaml:"allow_run_output_schema,omitempty"`
	// Subagents are agents of this file the agent may call as tools: a call starts a
	// child run of that agent on a task, and its result is the child's answer (its
	// final text, or its typed result). Written as names, or as {agent, as,
	// description}. An agent may not reach itself through them.
	Subagents []SubagentConfig `yaml:"subagents,omitempty"`
}

// SubagentConfig is one agent another may call as a tool.
type SubagentConfig struct {
	// Agent names the agent a call runs.
	Agent string `yaml:"agent"`
	// As names the tool; left out: the agent's name.
	As string `yaml:"as,omitempty"`
	// Description tells the model what the agent does; left out: the agent's own
	// description.
	Description string `yaml:"description,omitempty"`
}

// UnmarshalYAML takes a name, or a mapping with agent, as and description.
func (s *SubagentConfig) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		s.Agent = n.Value
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a sub-agent is an agent's name, or {agent, as, description}", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var dst *string
		switch k.Value {
		case "agent":
			dst = &s.Agent
		case "as":
			dst = &s.As
		case "description":
			dst = &s.Description
		default:
			return fmt.Errorf("line %d: field %s not found in a sub-agent: want agent, as or description", k.Line, k.Value)
		}
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: %s: want a string", v.Line, k.Value)
		}
		*dst = v.Value
	}
	return nil
}

// tool is the name of the tool a's call of s goes by.
func (s SubagentConfig) tool() string { return cmp.Or(s.As, s.Agent) }

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
	// MaxGrant is the widest grant of every tool not named in Tools, of client tools,
	// and of the tools Tools names without a max_grant of their own: how far a client's
	// approval of one call may reach. "once" approves the call alone; "run" also the
	// run's later calls of the tool (with the same arguments, unless the tool's
	// GrantAnyArguments says otherwise); "thread" (the default) also those of the
	// thread's later runs (see [runtime.ToolPolicy].MaxGrant). A client may ask for
	// less. A grant never approves a call of a tool whose approval is "always", and a
	// tool whose approval is "auto" never asks, so grants do not matter for it.
	MaxGrant string `yaml:"max_grant,omitempty"`
	// Tools sets the policy of single tools, by name; they must be the agent's tools,
	// from the catalogue or, under the names the agent exposes them as, from its MCP
	// servers. An entry replaces the tool's own approval (when it names one), the
	// agent's MaxGrant (when it names one) and the tool's own declaration of
	// idempotency (when it sets Idempotent).
	Tools map[string]ToolPolicyConfig `yaml:"tools,omitempty"`
}

// ToolPolicyConfig is the policy of one tool.
type ToolPolicyConfig struct {
	// Disabled tools are not offered to the model; their calls get an error result.
	Disabled bool `yaml:"disabled,omitempty"`
	// Approval is "auto", "ask" or "always" (see [runtime.Approval]); empty means the
	// agent's default approval.
	Approval string `yaml:"approval,omitempty"`
	// MaxGrant is "once", "run" or "thread" (see PolicyConfig.MaxGrant); empty means the
	// agent's policy.max_grant.
	MaxGrant string `yaml:"max_grant,omitempty"`
	// GrantAnyArguments lets a client's grant approve the tool's later calls whatever
	// their arguments ([runtime.ToolPolicy].GrantAnyArguments); false, the default,
	// approves only calls with the very arguments approved. Set it only for tools whose
	// arguments a person need not see call by call, such as read-only lookups.
	GrantAnyArguments bool `yaml:"grant_any_arguments,omitempty"`
	// Idempotent, when set, replaces the tool's own declaration
	// ([runtime.ToolSpec].Idempotent): whether a call that had started when the process
	// running it was lost is run again where the run goes on (true), or gets an error
	// result telling the model its outcome is unknown (false). Nil keeps the tool's own:
	// true for current_time, calculate and http_fetch, false for save_note, echo and
	// add; for an MCP tool, true when its server annotates it idempotent or read-only
	// (idempotentHint, readOnlyHint). Declare a tool idempotent only when running a call
	// twice has the effect of running it once, for example because what it calls tells
	// a repeat by the call's idempotency key ([runtime.IdempotencyKey]).
	Idempotent *bool `yaml:"idempotent,omitempty"`
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

// Default returns the agents a server offers without an agents file: the
// built-in demo agent, "demo", on the demo model, with current_time, calculate and
// save_note (whose calls ask for an approval). With a model override
// ([RegistryOptions.ModelOverride]) it runs on that model; on a workload model its tools
// are the workload's echo and add.
func Default() *Config {
	return &Config{
		DefaultAgent: "demo",
		Agents: []AgentConfig{{
			Name:        "demo",
			Description: "agentd's built-in demo agent: tells the time, calculates, and saves notes (saving asks for your approval).",
			Model:       "demo",
		}},
	}
}

// LoadFile reads and checks the agents file at path. Decoding is strict: an unknown
// field is an error. Every error names the file and line, and the agent and field at
// fault; all that are found are reported together. Models are resolved later, by
// [NewRegistry].
func LoadFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agents file: %w", err)
	}
	cfg, err := parse(path, data)
	if err != nil {
		return nil, err
	}
	if errs := cfg.check(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

func parse(path string, data []byte) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, locateSyntaxError(path, data, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want a mapping with an agents list (and optionally default_agent)", path)
	}
	cfg := &Config{path: path, root: doc.Content[0]}
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
