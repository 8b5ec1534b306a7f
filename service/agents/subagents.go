package agents

import (
	"regexp"
	"slices"
	"strings"

	"github.com/agentd/agentd/service/runs"
)

// subagentToolRE is what a tool's name may be (the runtime's rule).
var subagentToolRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// checkSubagents checks agent i's sub-agents: each names an agent of the file, and goes
// by a tool name of its own.
func (c *Config) checkSubagents(i int, add func(error)) {
	a := c.Agents[i]
	names := map[string]bool{}
	for _, ag := range c.Agents {
		names[ag.Name] = true
	}
	taken := map[string]string{}
	for _, t := range a.Tools {
		taken[t] = "the tool " + t
	}
	for k, sa := range a.Subagents {
		at := cfgPath{"subagents", k}
		switch {
		case sa.Agent == "":
			add(c.errorf(i, at, "agent: required"))
			continue
		case !names[sa.Agent]:
			add(c.errorf(i, at, "no agent named %q in the file; agents: %s", sa.Agent, strings.Join(c.names(), ", ")))
		case !subagentToolRE.MatchString(sa.tool()):
			add(c.errorf(i, at, "as: invalid tool name %q: want 1 to 64 letters, digits, '_' or '-'", sa.tool()))
		}
		if other, dup := taken[sa.tool()]; dup {
			add(c.errorf(i, at, "the tool name %q is %s's too: name one with as", sa.tool(), other))
		}
		taken[sa.tool()] = "sub-agent " + sa.Agent
	}
}

// checkSubagentCycles refuses an agent that reaches itself through sub-agents: its
// calls would nest without end. The error names the path.
func (c *Config) checkSubagentCycles(add func(error)) {
	index := map[string]int{}
	for i, a := range c.Agents {
		index[a.Name] = i
	}
	const (
		unseen = iota
		open
		done
	)
	state := make([]int, len(c.Agents))
	var path []string
	var visit func(i int)
	visit = func(i int) {
		state[i] = open
		path = append(path, c.Agents[i].Name)
		for k, sa := range c.Agents[i].Subagents {
			j, ok := index[sa.Agent]
			if !ok {
				continue
			}
			switch state[j] {
			case open:
				from := slices.Index(path, sa.Agent)
				cycle := append(slices.Clone(path[from:]), sa.Agent)
				add(c.errorf(i, cfgPath{"subagents", k}, "a cycle of sub-agents: %s; an agent may not call itself, directly or through others", strings.Join(cycle, " → ")))
			case unseen:
				visit(j)
			}
		}
		path = path[:len(path)-1]
		state[i] = done
	}
	for i := range c.Agents {
		if state[i] == unseen {
			visit(i)
		}
	}
}

// subagents returns agent i's sub-agents as the engine takes them, each described by
// its entry or, without one, by its agent's description.
func (c *Config) subagents(i int) []runs.Subagent {
	var out []runs.Subagent
	for _, sa := range c.Agents[i].Subagents {
		desc := sa.Description
		if desc == "" {
			for _, a := range c.Agents {
				if a.Name == sa.Agent && a.Description != "" {
					desc = "Delegate a task to the agent " + sa.Agent + ": " + a.Description
				}
			}
		}
		out = append(out, runs.Subagent{Agent: sa.Agent, Tool: sa.tool(), Description: desc})
	}
	return out
}
