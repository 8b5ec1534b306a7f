package agents

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/tool/mcp"
)

// MCPServerConfig declares an MCP server whose tools agents may use (AgentConfig.MCPServers):
// a command speaking MCP over its standard input and output, or the URL of a streamable
// HTTP endpoint. Only this file starts processes or reaches hosts for MCP; clients never
// name servers. See package runtime/tool/mcp for how tools are named, called and
// restarted.
type MCPServerConfig struct {
	// Name identifies the server in agents' mcp_servers, in ListAgents ("mcp:<name>"),
	// in logs, and as the prefix of tool names that clash; ^[A-Za-z0-9_-]{1,64}$.
	Name string `yaml:"name"`
	// Command starts the server (stdio transport), looked up in agentd's PATH.
	Command string `yaml:"command,omitempty"`
	// Args are the command's arguments.
	Args []string `yaml:"args,omitempty"`
	// Env is added to the process's environment, which otherwise holds only HOME, LANG,
	// LOGNAME, PATH, SHELL, TERM, TMPDIR and USER. Values may reference agentd's
	// variables as ${NAME}.
	Env map[string]string `yaml:"env,omitempty"`
	// Dir is the process's working directory; empty means agentd's.
	Dir string `yaml:"dir,omitempty"`
	// URL is the endpoint of a streamable HTTP server; exactly one of Command and URL.
	URL string `yaml:"url,omitempty"`
	// Headers are sent with every HTTP request. Values may reference agentd's variables
	// as ${NAME}, so that tokens stay out of the file; they are never logged.
	Headers map[string]string `yaml:"headers,omitempty"`
	// Timeout bounds one call of one of the server's tools; 0 leaves calls to the
	// agent's tool_timeout.
	Timeout Duration `yaml:"timeout,omitempty"`
	// Approval, when set (auto, ask or always), is the approval of every tool of the
	// server, replacing what the tools' annotations imply.
	Approval string `yaml:"approval,omitempty"`
}

// envRefRE matches a reference to an environment variable, ${NAME}.
var envRefRE = regexp.MustCompile(`\$\{([^}]*)\}`)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expandEnv replaces the ${NAME} references of s with agentd's environment. A reference
// to a variable that is not set is an error naming it; the error never holds a value.
func expandEnv(s string) (string, error) {
	var errs []error
	out := envRefRE.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		if !envNameRE.MatchString(name) {
			errs = append(errs, fmt.Errorf("${%s}: not a variable name", name))
			return ""
		}
		v, ok := os.LookupEnv(name)
		if !ok {
			errs = append(errs, fmt.Errorf("${%s}: the variable %s is not set", name, name))
		}
		return v
	})
	return out, errors.Join(errs...)
}

// serverConfig returns the server's config for package mcp, with ${NAME} references
// expanded.
func (s MCPServerConfig) serverConfig() (mcp.ServerConfig, []fieldError) {
	cfg := mcp.ServerConfig{
		Name: s.Name, Command: s.Command, Args: s.Args, Dir: s.Dir, URL: s.URL,
		Timeout: time.Duration(s.Timeout),
	}
	var errs []fieldError
	expand := func(field string, m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		out := make(map[string]string, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			v, err := expandEnv(m[k])
			if err != nil {
				errs = append(errs, fieldError{cfgPath{field, k}, err})
			}
			out[k] = v
		}
		return out
	}
	cfg.Env = expand("env", s.Env)
	cfg.Headers = expand("headers", s.Headers)
	if s.Approval != "" {
		a, err := parseApproval(s.Approval)
		if err != nil {
			errs = append(errs, fieldError{cfgPath{"approval"}, err})
		}
		cfg.Approval = &a
	}
	return cfg, errs
}

// A fieldError is a problem with the field at path, relative to some node.
type fieldError struct {
	path cfgPath
	err  error
}

// defaultMCPConnectTimeout is RegistryOptions.MCPConnectTimeout's default.
const defaultMCPConnectTimeout = 30 * time.Second

// connectMCP connects, all at once, to the MCP servers that some agent uses, and
// returns them by name. It fails, with nothing left running, when any server cannot be
// started, reached or listed within the connect timeout; each error names its server.
func (c *Config) connectMCP(opts RegistryOptions) (map[string]*mcp.Source, error) {
	used := map[string]bool{}
	for _, a := range c.Agents {
		for _, name := range a.MCPServers {
			used[name] = true
		}
	}
	timeout := opts.MCPConnectTimeout
	if timeout <= 0 {
		timeout = defaultMCPConnectTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sources := make([]*mcp.Source, len(c.MCPServers))
	errs := make([]error, len(c.MCPServers))
	var wg sync.WaitGroup
	for i, s := range c.MCPServers {
		if !used[s.Name] {
			opts.Logger.Warn("mcp server not started: no agent names it in mcp_servers", "mcp_server", s.Name)
			continue
		}
		cfg, _ := s.serverConfig() // checked already
		wg.Go(func() {
			src, err := mcp.Connect(ctx, cfg, mcp.WithLogger(opts.Logger))
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					err = fmt.Errorf("%w (the connect timeout is %v)", err, timeout)
				}
				errs[i] = c.errorf(-1, cfgPath{"mcp_servers", i}, "%v", err)
				return
			}
			sources[i] = src
		})
	}
	wg.Wait()
	out := map[string]*mcp.Source{}
	for _, src := range sources {
		if src != nil {
			out[src.Name()] = src
		}
	}
	if err := errors.Join(errs...); err != nil {
		closeSources(out)
		return nil, err
	}
	return out, nil
}

func closeSources(sources map[string]*mcp.Source) {
	var wg sync.WaitGroup
	for _, src := range sources {
		wg.Go(func() { src.Close() })
	}
	wg.Wait()
}

// mcpToolPolicy is the policy of an MCP tool in an agent: the agent's explicit entry for
// it, if any, over what the server's annotations (or its approval) imply, tightened by
// the agent's default approval, and the agent's default max_grant.
func mcpToolPolicy(derived runtime.ToolPolicy, def runtime.ToolPolicy, explicit *ToolPolicyConfig) runtime.ToolPolicy {
	tp := runtime.ToolPolicy{Approval: max(derived.Approval, def.Approval), MaxGrant: def.MaxGrant}
	if explicit != nil {
		tp = explicit.over(tp)
	}
	return tp
}

// mcpSource returns "mcp:<server>" for a tool of an MCP server, and "" for any other.
func mcpSource(t runtime.Tool) string {
	if server, _, ok := mcp.Origin(t); ok {
		return "mcp:" + server
	}
	return ""
}
