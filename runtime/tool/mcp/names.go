package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/runtime"
)

// remoteTool is a tool as a server listed it, reduced to what agentd uses.
type remoteTool struct {
	name        string // the MCP name, which calls use
	description string
	params      json.RawMessage
	approval    runtime.Approval
	readOnly    bool
	idempotent  bool
}

func (t remoteTool) equal(u remoteTool) bool {
	return t.name == u.name && t.description == u.description && bytes.Equal(t.params, u.params) &&
		t.approval == u.approval && t.readOnly == u.readOnly && t.idempotent == u.idempotent
}

// toRemote converts the tools a server listed. A tool whose input schema agentd cannot
// compile is left out, with a warning: the agent would refuse it, and with it every
// other tool.
func (s *Source) toRemote(tools []*sdk.Tool) []remoteTool {
	out := make([]remoteTool, 0, len(tools))
	for _, t := range tools {
		var params json.RawMessage
		if t.InputSchema != nil {
			b, err := json.Marshal(t.InputSchema)
			if err == nil {
				_, err = runtime.CompileSchema(b)
			}
			if err != nil {
				s.log.Warn("mcp tool left out: its input schema does not compile", "tool", t.Name, "error", err)
				continue
			}
			params = b
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		if desc == "" && t.Annotations != nil {
			desc = t.Annotations.Title
		}
		approval := annotationApproval(t.Annotations)
		readOnly := approval == runtime.ApprovalAuto
		if s.cfg.Approval != nil {
			approval = *s.cfg.Approval
		}
		// A call lost with the process running it is run again only for a tool the
		// server says repeating has no further effect (idempotentHint), or that changes
		// nothing (readOnlyHint).
		idempotent := t.Annotations != nil && (t.Annotations.IdempotentHint || t.Annotations.ReadOnlyHint)
		out = append(out, remoteTool{name: t.Name, description: desc, params: params, approval: approval, readOnly: readOnly, idempotent: idempotent})
	}
	return out
}

// annotationApproval is the rule of [Source.Policy].
func annotationApproval(a *sdk.ToolAnnotations) runtime.Approval {
	if a != nil && a.ReadOnlyHint && (a.DestructiveHint == nil || !*a.DestructiveHint) {
		return runtime.ApprovalAuto
	}
	return runtime.ApprovalAsk
}

// Tools returns the server's tools as last listed, named as [Merge] names them for this
// source alone: each keeps its MCP name unless it is reserved ([WithReservedNames]).
// A tool of the snapshot stays callable after the list changes, as long as the server
// still knows its MCP name.
func (s *Source) Tools() []runtime.Tool {
	tools, _ := Merge(nil, s)
	return tools
}

// Policy returns the policy the server's tool annotations imply, under the names
// [Source.Tools] gives the tools. A tool runs without asking ([runtime.ApprovalAuto])
// only when its server marks it read-only (readOnlyHint true) and does not also mark it
// destructive (destructiveHint true); every other tool, including one without
// annotations, asks ([runtime.ApprovalAsk]). ServerConfig.Approval, when set, replaces
// the rule for all the server's tools.
//
// Only tools that ask are named in Policy.Tools; Policy.Default is the zero
// ToolPolicy. An agent that copies the entries into its own policy therefore keeps its
// own default for the read-only tools, and an agent's explicit entry for a tool should
// replace the one copied from here: that is how the config says otherwise.
//
// Annotations are hints from the server: a server that lies about them gets its tools
// run without asking. Set ServerConfig.Approval for a server not trusted that far.
func (s *Source) Policy() runtime.Policy {
	_, p := Merge(nil, s)
	return p
}

// Merge returns the tools of several sources, as last listed, as one list (the sources
// in order, each source's tools in the order its server listed them), with the policy
// their annotations imply (see [Source.Policy]).
//
// A tool is exposed under its MCP name unless another of the sources offers a tool of
// the same name, or the name is reserved (in reserved, or by [WithReservedNames] of one
// of the sources); then every tool of that name is exposed as "<server>__<tool>". A name
// that is not a valid tool name is made one: characters other than ASCII letters,
// digits, '_' and '-' become '_', and a name longer than 64 bytes is cut to 55 and given
// '_' and 8 hex digits of a hash of the whole name. Should two tools still end up with
// the same name, the later gets such a hash suffix too, so the names are always unique.
//
// Names depend on what the other sources offer: a tool's name changes when another
// source starts or stops offering a tool of the same name. Merge again after
// [Source.OnToolsChanged].
func Merge(reserved []string, sources ...*Source) ([]runtime.Tool, runtime.Policy) {
	taken := map[string]bool{}
	for _, n := range reserved {
		taken[n] = true
	}
	snaps := make([][]remoteTool, len(sources))
	count := map[string]int{}
	for i, s := range sources {
		for n := range s.o.reserved {
			taken[n] = true
		}
		snaps[i] = s.snapshot()
		for _, t := range snaps[i] {
			count[sanitize(t.name)]++
		}
	}
	var tools []runtime.Tool
	policy := runtime.Policy{}
	used := map[string]bool{}
	for i, s := range sources {
		for _, t := range snaps[i] {
			name := sanitize(t.name)
			if count[name] > 1 || taken[name] {
				name = sanitize(s.cfg.Name + "__" + t.name)
			}
			base := name
			for n := 2; used[name] || taken[name]; n++ {
				name = hashed(fmt.Sprintf("%s__%s#%d", s.cfg.Name, t.name, n), base)
			}
			used[name] = true
			tools = append(tools, &tool{src: s, remote: t.name, spec: runtime.ToolSpec{
				Name:        name,
				Description: t.description,
				Parameters:  t.params,
				Executor:    runtime.ExecutorServer,
				Timeout:     s.cfg.Timeout,
				// Read-only tools cannot disturb each other; the others keep the
				// order the model gave.
				Parallel:   t.readOnly,
				Idempotent: t.idempotent,
			}})
			if t.approval != runtime.ApprovalAuto {
				if policy.Tools == nil {
					policy.Tools = map[string]runtime.ToolPolicy{}
				}
				policy.Tools[name] = runtime.ToolPolicy{Approval: t.approval}
			}
		}
	}
	return tools, policy
}

const maxName = 64

// sanitize makes name a valid tool name.
func sanitize(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" {
		s = "_"
	}
	if len(s) > maxName {
		return hashed(name, s)
	}
	return s
}

// hashed returns s cut so that '_' and 8 hex digits of the hash of key fit after it.
func hashed(key, s string) string {
	h := fnv.New32a()
	h.Write([]byte(key))
	return fmt.Sprintf("%s_%08x", s[:min(len(s), maxName-9)], h.Sum32())
}
