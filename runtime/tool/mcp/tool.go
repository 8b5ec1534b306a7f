package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/runtime"
)

// tool is one tool of a server, as [Merge] exposes it.
type tool struct {
	src    *Source
	remote string
	spec   runtime.ToolSpec
}

// IdempotencyKeyMeta is the _meta key under which a CallTool request carries the call's
// idempotency key ([runtime.IdempotencyKey]): the same for every time agentd runs the
// call, so that a server can tell a call run again after the replica running it was
// lost from a new one.
const IdempotencyKeyMeta = "agentd/idempotency-key"

func (t *tool) Spec() runtime.ToolSpec { return t.spec }

// Execute calls the tool on the server's current session with the call's arguments,
// bounded by ServerConfig.Timeout when set. A result the server marks as an error is an
// error output; a failure to get a result at all (the server is reconnecting, the
// session broke, the server answered with a protocol error, no result in time) is a Go
// error, which the runtime turns into an error result.
func (t *tool) Execute(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
	s := t.src
	cs, err := s.current()
	if err != nil {
		return runtime.Output{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	if s.cfg.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
	}
	args := json.RawMessage(call.Arguments)
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	params := &sdk.CallToolParams{Name: t.remote, Arguments: args}
	if key := runtime.IdempotencyKey(ctx); key != "" {
		// The server can tell a call run again (a run taken up elsewhere) by its key.
		params.Meta = sdk.Meta{IdempotencyKeyMeta: key}
	}
	res, err := cs.CallTool(ctx, params)
	_, answered := errors.AsType[*jsonrpc.Error](err)
	switch {
	case err == nil:
		return toOutput(res)
	case s.life.Err() != nil:
		return runtime.Output{}, s.Err()
	case answered:
		// The server answered, with an error rather than an error result.
		return runtime.Output{}, fmt.Errorf("mcp server %q: tool %q: %w", s.cfg.Name, t.remote, err)
	case errors.Is(err, context.DeadlineExceeded) && s.cfg.Timeout > 0 && ctx.Err() != nil:
		return runtime.Output{}, fmt.Errorf("mcp server %q: tool %q: no result within %v: %w", s.cfg.Name, t.remote, s.cfg.Timeout, context.DeadlineExceeded)
	case ctx.Err() != nil:
		return runtime.Output{}, fmt.Errorf("mcp server %q: tool %q: %w", s.cfg.Name, t.remote, err)
	}
	return runtime.Output{}, fmt.Errorf("%w: server %q: the session ended during the call (%v); it is being reconnected", ErrUnavailable, s.cfg.Name, err)
}

// Origin reports the server and the MCP name of a tool made by this package, and
// whether it is one: a service shows "mcp:<server>" as the tool's source.
func Origin(t runtime.Tool) (server, name string, ok bool) {
	mt, ok := t.(*tool)
	if !ok {
		return "", "", false
	}
	return mt.src.cfg.Name, mt.remote, true
}

// toOutput converts a tool result. Text content becomes the output's text, one block a
// line; structured content becomes its JSON; images, audio and binary resources become
// media with their MIME types, and resource links media with only a URI. A text
// resource is text.
func toOutput(res *sdk.CallToolResult) (runtime.Output, error) {
	out := runtime.Output{IsError: res.IsError}
	var text []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			text = append(text, c.Text)
		case *sdk.ImageContent:
			out.Media = append(out.Media, runtime.Media{MIMEType: c.MIMEType, Data: c.Data})
		case *sdk.AudioContent:
			out.Media = append(out.Media, runtime.Media{MIMEType: c.MIMEType, Data: c.Data})
		case *sdk.ResourceLink:
			out.Media = append(out.Media, runtime.Media{MIMEType: c.MIMEType, URI: c.URI, Name: c.Name})
		case *sdk.EmbeddedResource:
			r := c.Resource
			switch {
			case r == nil:
			case r.Blob != nil:
				out.Media = append(out.Media, runtime.Media{MIMEType: r.MIMEType, Data: r.Blob, URI: r.URI})
			default:
				text = append(text, r.Text)
			}
		default:
			// Only sampling messages hold other kinds; a server that sends one here
			// still gets its content seen, as JSON.
			b, err := json.Marshal(c)
			if err != nil {
				return runtime.Output{}, fmt.Errorf("tool result: %w", err)
			}
			text = append(text, string(b))
		}
	}
	out.Text = strings.Join(text, "\n")
	if res.StructuredContent != nil {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(res.StructuredContent); err != nil {
			return runtime.Output{}, fmt.Errorf("tool result: structured content: %w", err)
		}
		out.JSON = bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	}
	if out.IsError && out.Text == "" && out.JSON == nil {
		out.Text = "the tool failed without saying why"
	}
	return out, nil
}
