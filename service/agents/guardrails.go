package agents

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/agentd/agentd/hooks/guardrail"
	"github.com/agentd/agentd/hooks/remote"
	"github.com/agentd/agentd/runtime"
)

// GuardrailConfig is one guardrail of an agent (hooks.guardrails): what it checks, at
// which stages, and what a trip does. Exactly one of DenyList, MaxSize,
// ToolOutputSchema and Remote says what it checks. Guardrails are checked in the order
// listed, after the server-wide ones; the first that trips decides.
type GuardrailConfig struct {
	// Name names the guardrail in run_finished's error, spans and logs; required, and
	// unique among the agent's guardrails.
	Name string `yaml:"name"`
	// DenyList refuses text that matches a regular expression (RE2) or holds a keyword
	// (case-insensitive). Default stages: input, output.
	DenyList *DenyListConfig `yaml:"deny_list,omitempty"`
	// MaxSize refuses text longer than a number of bytes. Default stage: output.
	MaxSize *MaxSizeConfig `yaml:"max_size,omitempty"`
	// ToolOutputSchema refuses a tool result that does not match this JSON Schema
	// (YAML, or a string of JSON); name the tools whose results it describes in Tools.
	// Its stage is tool_output.
	ToolOutputSchema *SchemaConfig `yaml:"tool_output_schema,omitempty"`
	// Remote is a guardrail served by agentd.hooks.v1.HookService's Guard RPC; Stages is
	// required with it.
	Remote *RemoteGuardrailConfig `yaml:"remote,omitempty"`
	// Stages are the stages checked: input, output, tool_input, tool_output.
	Stages []string `yaml:"stages,omitempty"`
	// Mode is "blocking" (the default: the run waits for the check) or "parallel": the
	// input stage is checked alongside the model call, and a trip cancels it.
	Mode string `yaml:"mode,omitempty"`
	// AfterApproval checks tool_input once a call is approved, rather than before its
	// approval is asked.
	AfterApproval bool `yaml:"after_approval,omitempty"`
	// OnToolTrip is what a trip at a tool stage does: "end" (the default) ends the run;
	// "correct" gives the call an error result the model reads, and the run goes on.
	OnToolTrip string `yaml:"on_tool_trip,omitempty"`
	// Tools limits the tool stages to these tools; empty means every tool.
	Tools []string `yaml:"tools,omitempty"`
	// FailOpen lets the run go on when the check fails (a remote guardrail down or
	// slow); by default a guardrail that cannot check trips.
	FailOpen bool `yaml:"fail_open,omitempty"`
}

// DenyListConfig configures a deny_list guardrail: at least one pattern or keyword.
type DenyListConfig struct {
	Patterns []string `yaml:"patterns,omitempty"`
	Keywords []string `yaml:"keywords,omitempty"`
}

// MaxSizeConfig configures a max_size guardrail.
type MaxSizeConfig struct {
	// Bytes is the largest text allowed; required.
	Bytes int `yaml:"bytes"`
}

// RemoteGuardrailConfig names a remote guardrail: its address, the deadline of each
// check, and the connection, as for a remote hook (RemoteHookConfig).
type RemoteGuardrailConfig struct {
	Address   string               `yaml:"address"`
	Timeout   Duration             `yaml:"timeout,omitempty"`
	TLS       *RemoteHookTLSConfig `yaml:"tls,omitempty"`
	Plaintext bool                 `yaml:"plaintext,omitempty"`
}

// spec reads what g says of its stages and trips, telling bad of each field at fault
// (a path under the guardrail's entry); ok is false when it did.
func (g GuardrailConfig) spec(bad func(path cfgPath, format string, args ...any)) (spec runtime.GuardSpec, ok bool) {
	ok = true
	fault := func(path cfgPath, format string, args ...any) {
		ok = false
		bad(path, format, args...)
	}
	spec = runtime.GuardSpec{Name: g.Name, AfterApproval: g.AfterApproval, Tools: slices.Clone(g.Tools), FailOpen: g.FailOpen}
	if g.Name == "" {
		fault(cfgPath{"name"}, "required")
	}
	for k, s := range g.Stages {
		st, err := runtime.ParseGuardStage(s)
		if err != nil {
			fault(cfgPath{"stages", k}, "%v", err)
		}
		spec.Stages |= st
	}
	switch g.Mode {
	case "", "blocking":
	case "parallel":
		spec.Parallel = true
	default:
		fault(cfgPath{"mode"}, "unknown mode %q: want blocking or parallel", g.Mode)
	}
	switch g.OnToolTrip {
	case "", "end":
	case "correct":
		spec.OnToolTrip = runtime.GuardCorrect
	default:
		fault(cfgPath{"on_tool_trip"}, "unknown action %q: want end or correct", g.OnToolTrip)
	}
	for k, t := range g.Tools {
		if t == "" {
			fault(cfgPath{"tools", k}, "empty tool name")
		}
	}
	kinds := 0
	for _, set := range []bool{g.DenyList != nil, g.MaxSize != nil, g.ToolOutputSchema != nil, g.Remote != nil} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds == 0:
		fault(nil, "say what it checks: deny_list, max_size, tool_output_schema or remote")
	case kinds > 1:
		fault(nil, "deny_list, max_size, tool_output_schema and remote exclude each other; one guardrail checks one way")
	case g.Remote != nil && spec.Stages == 0:
		fault(cfgPath{"stages"}, "required with remote: input, output, tool_input, tool_output")
	case g.Remote != nil && g.Remote.Address == "":
		fault(cfgPath{"remote", "address"}, "must be set")
	case spec.Parallel && spec.Stages != 0 && spec.Stages&runtime.GuardInput == 0:
		fault(cfgPath{"mode"}, "parallel applies to the input stage, which stages does not list")
	}
	return spec, ok
}

// kind is the key that says what g checks.
func (g GuardrailConfig) kind() string {
	switch {
	case g.DenyList != nil:
		return "deny_list"
	case g.MaxSize != nil:
		return "max_size"
	case g.ToolOutputSchema != nil:
		return "tool_output_schema"
	}
	return "remote"
}

// builtin makes a built-in guardrail of g, or returns nil for a remote one.
func (g GuardrailConfig) builtin(spec runtime.GuardSpec) (runtime.Guardrail, error) {
	switch {
	case g.DenyList != nil:
		return guardrail.DenyList(spec, g.DenyList.Patterns, g.DenyList.Keywords)
	case g.MaxSize != nil:
		return guardrail.MaxSize(spec, g.MaxSize.Bytes)
	case g.ToolOutputSchema != nil:
		return guardrail.ToolOutputSchema(spec, g.ToolOutputSchema.JSON)
	}
	return nil, nil
}

// checkGuardrails checks agent i's guardrails as far as can be done without
// connecting: built-ins are built (and dropped), remote ones are not dialled.
func (c *Config) checkGuardrails(i int, add func(error)) {
	seen := map[string]int{}
	for k, g := range c.Agents[i].Hooks.Guardrails {
		at := func(path cfgPath) cfgPath { return append(cfgPath{"hooks", "guardrails", k}, path...) }
		spec, ok := g.spec(func(path cfgPath, format string, args ...any) { add(c.errorf(i, at(path), format, args...)) })
		if !ok {
			continue
		}
		if j, dup := seen[g.Name]; dup {
			add(c.errorf(i, at(cfgPath{"name"}), "%q is the name of hooks.guardrails[%d] too", g.Name, j))
		}
		seen[g.Name] = k
		if _, err := g.builtin(spec); err != nil {
			add(c.errorf(i, at(cfgPath{g.kind()}), "%v", err))
		}
	}
}

// buildGuardrails makes the agent's guardrails, dialling the remote ones; the closers
// release their connections.
func (h HooksConfig) buildGuardrails(log *slog.Logger) ([]runtime.Hooks, []func() error, []error) {
	var hs []runtime.Hooks
	var closers []func() error
	var errs []error
	for k, g := range h.Guardrails {
		prefix := fmt.Sprintf("hooks.guardrails[%d]", k)
		spec, ok := g.spec(func(path cfgPath, format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: %s", append(cfgPath{prefix}, path...), fmt.Sprintf(format, args...)))
		})
		if !ok {
			continue
		}
		if g.Remote == nil {
			b, err := g.builtin(spec)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %v", prefix, err))
				continue
			}
			hs = append(hs, b)
			continue
		}
		r := g.Remote
		opts, err := remoteOptions(prefix+".remote", r.TLS, r.Plaintext)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		opts = append(opts, remote.WithLogger(log))
		if r.Timeout != 0 {
			opts = append(opts, remote.WithTimeout(time.Duration(r.Timeout)))
		}
		rg, err := remote.DialGuardrail(r.Address, spec, opts...)
		if err != nil {
			errs = append(errs, dialError(prefix+".remote", r.Address, err))
			continue
		}
		closers = append(closers, rg.Close)
		hs = append(hs, rg)
	}
	return hs, closers, errs
}
