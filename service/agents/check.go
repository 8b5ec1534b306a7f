package agents

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/tool/builtin"
)

var agentNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// check finds the problems that need no model: names, tools, policies, limits and the
// default agent.
func (c *Config) check() []error {
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
		if _, err := parseGrant(a.Policy.MaxGrant); err != nil {
			add(c.errorf(i, cfgPath{"policy", "max_grant"}, "%v", err))
		}
		subTools := map[string]bool{}
		for _, sa := range a.Subagents {
			subTools[sa.tool()] = true
		}
		for _, t := range slices.Sorted(maps.Keys(a.Policy.Tools)) {
			// The names of MCP tools are known once the servers are connected:
			// NewRegistry checks them then.
			if catalogue[t] == nil && !subTools[t] && len(a.MCPServers) == 0 {
				add(c.errorf(i, cfgPath{"policy", "tools", t}, "unknown tool %q; known tools: %s", t, strings.Join(catalogueOrder, ", ")))
			}
			if _, err := parseApproval(a.Policy.Tools[t].Approval); err != nil {
				add(c.errorf(i, cfgPath{"policy", "tools", t, "approval"}, "%v", err))
			}
			if _, err := parseGrant(a.Policy.Tools[t].MaxGrant); err != nil {
				add(c.errorf(i, cfgPath{"policy", "tools", t, "max_grant"}, "%v", err))
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
		if a.OutputSchema != nil {
			if err := runtime.CheckOutputSchema(a.OutputSchema.JSON); err != nil {
				add(c.errorf(i, cfgPath{"output_schema"}, "%v", strings.TrimPrefix(strings.TrimPrefix(err.Error(), "runtime: "), "OutputSchema: ")))
			}
		}
		if a.OutputCorrections < -1 {
			add(c.errorf(i, cfgPath{"output_corrections"}, "must be -1 (none), 0 (the default, 2) or positive, got %d", a.OutputCorrections))
		}
		if _, err := parseOutputMode(a.OutputMode); err != nil {
			add(c.errorf(i, cfgPath{"output_mode"}, "%v", err))
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
		c.checkGuardrails(i, add)
		c.checkSubagents(i, add)
	}
	c.checkSubagentCycles(add)
	if d := c.DefaultAgent; d != "" && len(c.Agents) > 0 {
		if _, ok := seen[d]; !ok {
			add(c.errorf(-1, cfgPath{"default_agent"}, "no agent named %q; agents: %s", d, strings.Join(c.names(), ", ")))
		}
	}
	return errs
}

// checkHTTPFetch checks agent i's http_fetch tool and its config, which go together.
func (c *Config) checkHTTPFetch(i int, add func(error)) {
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

func (c *Config) mcpServerNames() []string {
	names := make([]string, 0, len(c.MCPServers))
	for _, s := range c.MCPServers {
		names = append(names, s.Name)
	}
	return names
}

func (c *Config) names() []string {
	names := make([]string, 0, len(c.Agents))
	for _, a := range c.Agents {
		names = append(names, a.Name)
	}
	return names
}

func (c *Config) defaultIndex() int {
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

// parseGrant reads a max_grant; empty is runtime.GrantDefault, which the runtime takes
// for runtime.GrantThread.
func parseGrant(s string) (runtime.GrantScope, error) {
	switch s {
	case "":
		return runtime.GrantDefault, nil
	case "once":
		return runtime.GrantOnce, nil
	case "run":
		return runtime.GrantRun, nil
	case "thread":
		return runtime.GrantThread, nil
	}
	return 0, fmt.Errorf("invalid max_grant %q: want once, run or thread", s)
}

// checkMCPServers checks the mcp_servers list and returns the servers by name.
func (c *Config) checkMCPServers(add func(error)) map[string]int {
	byName := map[string]int{}
	for i, s := range c.MCPServers {
		at := cfgPath{"mcp_servers", i}
		if j, dup := byName[s.Name]; dup && s.Name != "" {
			add(c.errorf(-1, append(at, "name"), "duplicate mcp server name %q: mcp_servers[%d] has it too", s.Name, j))
		} else {
			byName[s.Name] = i
		}
		cfg, errs := s.serverConfig()
		if s.Timeout < 0 {
			errs = append(errs, fieldError{cfgPath{"timeout"}, fmt.Errorf("must not be negative, got %s", s.Timeout)})
		}
		for _, fe := range errs {
			add(c.errorf(-1, append(slices.Clone(at), fe.path...), "%v", fe.err))
		}
		if len(errs) > 0 {
			continue
		}
		if err := cfg.Check(); err != nil {
			// The error names the server; its fields are named in words.
			add(c.errorf(-1, at, "%v", err))
		}
	}
	return byName
}
