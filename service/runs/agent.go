package runs

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentd/agentd/runtime"
)

// Agent is one agent the engine runs. The engine reads it and never modifies it; an
// [Agents] implementation must not modify an Agent once it has returned it, and hands out
// a new one instead (a run keeps the Agent it started with).
type Agent struct {
	// Name is how clients name the agent (RunSpec.agent); Description says what it is for.
	Name, Description string
	// Runtime runs the agent; required. ListAgents shows its model's name and its step
	// limit.
	Runtime *runtime.Agent
	// Tools describe the agent's server tools for ListAgents: source, policy, timeout,
	// parallel. Nil derives them from Runtime: each tool's spec and its policy in
	// Runtime.Policy, no source, the spec's own timeout (none when it names none) and
	// Parallel false, as Runtime does not say how many calls it runs at once.
	Tools []ToolInfo
	// Models resolves a client's model override (RunConfig.model) to the model its run
	// uses; an error is the client's (INVALID_ARGUMENT naming the field). Nil means the
	// agent allows no override: a run that names a model is refused with
	// PERMISSION_DENIED.
	Models func(spec string) (runtime.Model, error)
	// RunOutputSchema lets a run ask for a typed result of its own
	// (RunConfig.output_schema), which tightens the agent's schema where it has one.
	// False refuses such a run with PERMISSION_DENIED.
	RunOutputSchema bool
	// Subagents are the agents Runtime offers as tools, each made with SubagentTool: a
	// call of one starts a child run, which its ToolExecutionStarted names.
	Subagents []Subagent
}

// subagent reports whether tool is one of a's sub-agents.
func (a *Agent) subagent(tool string) bool {
	for _, sa := range a.Subagents {
		if cmp.Or(sa.Tool, sa.Agent) == tool {
			return true
		}
	}
	return false
}

// ToolInfo describes one server tool of an agent, as ListAgents shows it.
type ToolInfo struct {
	// Spec is the tool's spec, as the runtime holds it.
	Spec runtime.ToolSpec
	// Source is where the tool comes from, such as "builtin", "workload", or "mcp:<server>"
	// for a tool of the MCP server of that name.
	Source string
	// Policy is the tool's policy in the agent.
	Policy runtime.ToolPolicy
	// Timeout is the per-call timeout in effect; 0 leaves it unsaid.
	Timeout time.Duration
	// Parallel says whether calls may run alongside other calls of the same step.
	Parallel bool
}

// Agents are the agents the engine runs. Implementations must be safe for concurrent use.
type Agents interface {
	// Agent returns the named agent; "" names the default one. An unknown name gets an
	// error that wraps [ErrAgentNotFound]; its text reaches the client.
	Agent(name string) (*Agent, error)
	// List returns every agent, sorted by name, for ListAgents. The slice is the
	// caller's.
	List() []*Agent
}

// ErrAgentNotFound is wrapped by the error of [Agents.Agent] for a name no agent has.
var ErrAgentNotFound = errors.New("agent not found")

// NewAgents returns a fixed set of agents defined in Go: def, the default agent, and
// more. Each Agent needs a Runtime and a name of its own; an empty Name takes the
// Runtime's. The Agents are copied: changing them afterwards changes nothing served. The
// set never changes; it is safe for concurrent use.
func NewAgents(def *Agent, more ...*Agent) (Agents, error) {
	set := fixedAgents{byName: map[string]*Agent{}}
	var errs []error
	for i, a := range append([]*Agent{def}, more...) {
		if a == nil || a.Runtime == nil {
			errs = append(errs, fmt.Errorf("service: agent %d: no Runtime", i))
			continue
		}
		c := *a
		if c.Name == "" {
			c.Name = c.Runtime.Name()
		}
		switch _, dup := set.byName[c.Name]; {
		case c.Name == "":
			errs = append(errs, fmt.Errorf("service: agent %d: no name", i))
			continue
		case dup:
			errs = append(errs, fmt.Errorf("service: agent %d: the name %q is taken", i, c.Name))
			continue
		}
		c.Tools = slices.Clone(c.Tools)
		set.byName[c.Name] = &c
		set.list = append(set.list, &c)
		if i == 0 {
			set.def = &c
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(set.list, func(a, b *Agent) int { return strings.Compare(a.Name, b.Name) })
	return &set, nil
}

// fixedAgents is the set NewAgents returns; it never changes.
type fixedAgents struct {
	def    *Agent
	byName map[string]*Agent
	list   []*Agent // by name
}

func (s *fixedAgents) Agent(name string) (*Agent, error) {
	if name == "" {
		return s.def, nil
	}
	if a, ok := s.byName[name]; ok {
		return a, nil
	}
	names := make([]string, len(s.list))
	for i, a := range s.list {
		names[i] = a.Name
	}
	return nil, fmt.Errorf("%w: %q; agents: %s", ErrAgentNotFound, name, strings.Join(names, ", "))
}

func (s *fixedAgents) List() []*Agent { return slices.Clone(s.list) }
