package agents

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Errors in an agents file name the file, the line, the agent and the field at fault:
// the config keeps the YAML nodes it was decoded from, to find lines by field path and
// field paths by line.

var (
	typeErrorRE  = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownField = regexp.MustCompile(`^field (\S+) not found in type (\S+)$`)
)

// typeError rewrites one of yaml's decoding errors to name the file, line, agent and
// field, and for an unknown field the fields that are known.
func (c *Config) typeError(msg string) error {
	m := typeErrorRE.FindStringSubmatch(msg)
	if m == nil {
		return fmt.Errorf("%s: %s", c.path, msg)
	}
	line, _ := strconv.Atoi(m[1])
	msg = m[2]
	agent, path := c.pathAt(line)
	if strings.HasSuffix(msg, " into bool") {
		// yaml names the type alone; a quoted "true" is a string, for instance.
		msg += "; want true or false"
	}
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
		reflect.TypeFor[Config](), reflect.TypeFor[AgentConfig](),
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
func (c *Config) errorf(i int, path cfgPath, format string, args ...any) error {
	return &configError{file: c.path, line: c.lineOf(i, path), agent: c.agentName(i), path: path, msg: fmt.Sprintf(format, args...)}
}

func (c *Config) agentName(i int) string {
	switch {
	case i < 0 || i >= len(c.Agents):
		return ""
	case c.Agents[i].Name == "":
		return fmt.Sprintf("agents[%d]", i)
	}
	return fmt.Sprintf("agent %q", c.Agents[i].Name)
}

// agentNodes returns the nodes of the agents list, when the config came from a file.
func (c *Config) agentNodes() []*yaml.Node {
	if n := mapValue(c.root, "agents"); n != nil && n.Kind == yaml.SequenceNode {
		return n.Content
	}
	return nil
}

// lineOf returns the line of agent i's field at path, or of the nearest node on the way
// there; 0 when the config did not come from a file.
func (c *Config) lineOf(i int, path cfgPath) int {
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
func (c *Config) pathAt(line int) (int, cfgPath) {
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

// describe lists names for an error message.
func describe(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
