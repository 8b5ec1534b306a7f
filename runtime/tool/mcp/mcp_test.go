package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/runtime/tool/mcp"
)

// binDir holds the test server binary, built once by testServer.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcp-test")
	if err != nil {
		panic(err)
	}
	binDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}

var quiet = slog.New(slog.DiscardHandler)

// memServer is an in-memory MCP server that a source can connect to again and again.
type memServer struct {
	*sdk.Server
	dials atomic.Int32
	// gate, when set, is received from before each connection after the first.
	gate chan struct{}
}

func newMemServer(t *testing.T) *memServer {
	t.Helper()
	s := &memServer{Server: sdk.NewServer(&sdk.Implementation{Name: "mem", Version: "v1"}, nil)}
	t.Cleanup(func() {
		for ss := range s.Sessions() {
			ss.Close()
		}
	})
	return s
}

func (s *memServer) dial(ctx context.Context) (sdk.Transport, error) {
	if s.dials.Add(1) > 1 && s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ct, st := sdk.NewInMemoryTransports()
	if _, err := s.Connect(ctx, st, nil); err != nil {
		return nil, err
	}
	return ct, nil
}

// add adds a tool with a fixed result, or one made by h.
func (s *memServer) add(name string, ann *sdk.ToolAnnotations, h sdk.ToolHandler) {
	if h == nil {
		h = func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: name + " ran"}}}, nil
		}
	}
	s.AddTool(&sdk.Tool{
		Name:        name,
		Description: "The " + name + " tool.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
		Annotations: ann,
	}, h)
}

func connect(t *testing.T, s *memServer, cfg mcp.ServerConfig, opts ...mcp.Option) *mcp.Source {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "mem"
	}
	opts = append([]mcp.Option{mcp.WithTransport(s.dial), mcp.WithLogger(quiet)}, opts...)
	src, err := mcp.Connect(t.Context(), cfg, opts...)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

func find(t *testing.T, tools []runtime.Tool, name string) runtime.Tool {
	t.Helper()
	for _, tl := range tools {
		if tl.Spec().Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %q among %v", name, names(tools))
	return nil
}

func names(tools []runtime.Tool) []string {
	var out []string
	for _, tl := range tools {
		out = append(out, tl.Spec().Name)
	}
	return out
}

func call(t *testing.T, tl runtime.Tool, args string) (runtime.Output, error) {
	t.Helper()
	return tl.Execute(t.Context(), runtime.ToolCall{ID: "call_1", Name: tl.Spec().Name, Arguments: args})
}

// eventually waits up to 10s for cond, checking every few milliseconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

func TestToolsAndPolicy(t *testing.T) {
	s := newMemServer(t)
	s.add("read", &sdk.ToolAnnotations{ReadOnlyHint: true}, nil)
	s.add("write", &sdk.ToolAnnotations{DestructiveHint: ptr(false)}, nil)
	s.add("delete", &sdk.ToolAnnotations{DestructiveHint: ptr(true)}, nil)
	s.add("contradictory", &sdk.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: ptr(true)}, nil)
	s.add("plain", nil, nil)
	s.add("calculate", &sdk.ToolAnnotations{ReadOnlyHint: true}, nil)
	s.add("files.read", &sdk.ToolAnnotations{ReadOnlyHint: true}, nil)
	s.add(strings.Repeat("x", 70), &sdk.ToolAnnotations{ReadOnlyHint: true}, nil)
	src := connect(t, s, mcp.ServerConfig{Timeout: 3 * time.Second}, mcp.WithReservedNames("calculate"))

	type row struct {
		Name, Remote, Description string
		Approval                  runtime.Approval
		Parallel                  bool
	}
	var got []row
	tools, policy := src.Tools(), src.Policy()
	for _, tl := range tools {
		spec := tl.Spec()
		server, remote, ok := mcp.Origin(tl)
		if !ok || server != "mem" {
			t.Errorf("Origin(%s) = %q, %q, %v", spec.Name, server, remote, ok)
		}
		if spec.Timeout != 3*time.Second || spec.Executor != runtime.ExecutorServer || spec.CompletesRun {
			t.Errorf("%s: spec %+v", spec.Name, spec)
		}
		if _, err := runtime.CompileSchema(spec.Parameters); err != nil || len(spec.Parameters) == 0 {
			t.Errorf("%s: parameters %s: %v", spec.Name, spec.Parameters, err)
		}
		got = append(got, row{spec.Name, remote, spec.Description, policy.For(spec.Name).Approval, spec.Parallel})
	}
	long := strings.Repeat("x", 70)
	want := []row{
		{"read", "read", "The read tool.", runtime.ApprovalAuto, true},
		{"write", "write", "The write tool.", runtime.ApprovalAsk, false},
		{"delete", "delete", "The delete tool.", runtime.ApprovalAsk, false},
		{"contradictory", "contradictory", "The contradictory tool.", runtime.ApprovalAsk, false},
		{"plain", "plain", "The plain tool.", runtime.ApprovalAsk, false},
		{"mem__calculate", "calculate", "The calculate tool.", runtime.ApprovalAuto, true},
		{"files_read", "files.read", "The files.read tool.", runtime.ApprovalAuto, true},
		{got[len(got)-1].Name, long, "The " + long + " tool.", runtime.ApprovalAuto, true},
	}
	// The server lists tools sorted by name.
	sortRows := cmp.Transformer("sort", func(rs []row) map[string]row {
		m := map[string]row{}
		for _, r := range rs {
			m[r.Remote] = r
		}
		return m
	})
	if diff := cmp.Diff(want, got, sortRows); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if n := got[len(got)-1].Name; len(n) != 64 || !strings.HasPrefix(n, strings.Repeat("x", 55)+"_") {
		t.Errorf("long name exposed as %q, want 55 x's, '_' and a hash", n)
	}
	// Only the tools that ask are named; the rest fall to the agent's default.
	if len(policy.Tools) != 4 || policy.Default != (runtime.ToolPolicy{}) {
		t.Errorf("Policy() = %+v, want 4 entries and a zero default", policy)
	}
	// An agent takes the tools as they are.
	if _, err := runtime.New(runtime.Config{Model: &runtimetest.Model{}, Tools: tools, Policy: policy}); err != nil {
		t.Errorf("runtime.New: %v", err)
	}
}

func TestApprovalOverride(t *testing.T) {
	s := newMemServer(t)
	s.add("read", &sdk.ToolAnnotations{ReadOnlyHint: true}, nil)
	s.add("delete", &sdk.ToolAnnotations{DestructiveHint: ptr(true)}, nil)
	for _, tc := range []struct {
		approval runtime.Approval
		want     map[string]runtime.ToolPolicy
	}{
		{runtime.ApprovalAuto, nil},
		{runtime.ApprovalAlways, map[string]runtime.ToolPolicy{
			"read":   {Approval: runtime.ApprovalAlways},
			"delete": {Approval: runtime.ApprovalAlways},
		}},
	} {
		src := connect(t, s, mcp.ServerConfig{Approval: ptr(tc.approval)})
		if diff := cmp.Diff(tc.want, src.Policy().Tools); diff != "" {
			t.Errorf("approval %v: Policy().Tools (-want +got):\n%s", tc.approval, diff)
		}
		// Parallel follows the annotations, not the override.
		if !find(t, src.Tools(), "read").Spec().Parallel || find(t, src.Tools(), "delete").Spec().Parallel {
			t.Errorf("approval %v: Parallel changed with the approval", tc.approval)
		}
	}
}

func TestExecute(t *testing.T) {
	s := newMemServer(t)
	result := func(r *sdk.CallToolResult) sdk.ToolHandler {
		return func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return r, nil }
	}
	var gotArgs sync.Map
	s.add("text", nil, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		gotArgs.Store("text", string(req.Params.Arguments))
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "one"}, &sdk.TextContent{Text: "two"}}}, nil
	})
	s.add("structured", nil, result(&sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: `{"sum":3,"html":"<b>"}`}},
		StructuredContent: map[string]any{"sum": 3, "html": "<b>"},
	}))
	s.add("failing", nil, result(&sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "no such file"}}, IsError: true}))
	s.add("silent_failure", nil, result(&sdk.CallToolResult{Content: []sdk.Content{}, IsError: true}))
	s.add("media", nil, result(&sdk.CallToolResult{Content: []sdk.Content{
		&sdk.TextContent{Text: "here you are"},
		&sdk.ImageContent{Data: []byte("\x89PNG\x00\xff"), MIMEType: "image/png"},
		&sdk.AudioContent{Data: []byte("RIFF\x00\x01"), MIMEType: "audio/wav"},
		&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///a.bin", MIMEType: "application/octet-stream", Blob: []byte{0, 1, 2, 255}}},
		&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///a.txt", MIMEType: "text/plain", Text: "text of a.txt"}},
		&sdk.ResourceLink{URI: "https://example.com/r", Name: "r", MIMEType: "text/html"},
	}}))
	s.add("protocol_error", nil, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return nil, errors.New("database on fire")
	})
	s.add("removed", nil, nil)
	src := connect(t, s, mcp.ServerConfig{})
	tools := src.Tools()
	s.RemoveTools("removed")

	for _, tc := range []struct {
		tool, args string
		want       runtime.Output
		wantErr    string
	}{
		{tool: "text", args: `{"q":"x"}`, want: runtime.Output{Text: "one\ntwo"}},
		{tool: "structured", args: `{}`, want: runtime.Output{Text: `{"sum":3,"html":"<b>"}`, JSON: json.RawMessage(`{"html":"<b>","sum":3}`)}},
		{tool: "failing", args: `{}`, want: runtime.Output{Text: "no such file", IsError: true}},
		{tool: "silent_failure", args: `{}`, want: runtime.Output{Text: "the tool failed without saying why", IsError: true}},
		{tool: "media", args: `{}`, want: runtime.Output{Text: "here you are\ntext of a.txt", Media: []runtime.Media{
			{MIMEType: "image/png", Data: []byte("\x89PNG\x00\xff")},
			{MIMEType: "audio/wav", Data: []byte("RIFF\x00\x01")},
			{MIMEType: "application/octet-stream", Data: []byte{0, 1, 2, 255}, URI: "file:///a.bin"},
			{MIMEType: "text/html", URI: "https://example.com/r", Name: "r"},
		}}},
		{tool: "protocol_error", args: `{}`, wantErr: `mcp server "mem": tool "protocol_error": ` + "calling \"tools/call\": database on fire"},
		{tool: "removed", args: `{}`, wantErr: `mcp server "mem": tool "removed": calling "tools/call": unknown tool "removed"`},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			got, err := call(t, find(t, tools, tc.tool), tc.args)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Execute = %+v, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
	if v, _ := gotArgs.Load("text"); v != `{"q":"x"}` {
		t.Errorf("server got arguments %v, want the call's", v)
	}
}

func TestTimeout(t *testing.T) {
	s := newMemServer(t)
	cancelled := make(chan struct{})
	s.add("hang", nil, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	})
	src := connect(t, s, mcp.ServerConfig{Timeout: 50 * time.Millisecond})
	tl := find(t, src.Tools(), "hang")
	_, err := call(t, tl, `{}`)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no result within 50ms") {
		t.Fatalf("Execute: %v; want a timeout", err)
	}
	// The server is told to give up.
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the server's handler was not cancelled")
	}
}

func TestListChanged(t *testing.T) {
	s := newMemServer(t)
	s.add("first", nil, nil)
	src := connect(t, s, mcp.ServerConfig{})
	changed := make(chan struct{}, 10)
	src.OnToolsChanged(func() { changed <- struct{}{} })
	wait := func(want ...string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("no change reported; tools %v", names(src.Tools()))
		}
		if diff := cmp.Diff(want, names(src.Tools())); diff != "" {
			t.Errorf("tools (-want +got):\n%s", diff)
		}
	}
	s.add("second", &sdk.ToolAnnotations{ReadOnlyHint: true}, nil)
	wait("first", "second")
	if out, err := call(t, find(t, src.Tools(), "second"), `{}`); err != nil || out.Text != "second ran" {
		t.Errorf("second: %+v, %v", out, err)
	}
	s.RemoveTools("first")
	wait("second")
}

func TestMerge(t *testing.T) {
	a, b := newMemServer(t), newMemServer(t)
	a.add("search", nil, nil)
	a.add("only_a", &sdk.ToolAnnotations{ReadOnlyHint: true}, nil)
	a.add("calculate", nil, nil)
	b.add("search", &sdk.ToolAnnotations{ReadOnlyHint: true}, nil)
	b.add("only_b", nil, nil)
	b.add("a__search", nil, nil) // the namespaced name of a's search
	srcA := connect(t, a, mcp.ServerConfig{Name: "a"})
	srcB := connect(t, b, mcp.ServerConfig{Name: "b"}, mcp.WithReservedNames("only_b"))

	tools, policy := mcp.Merge([]string{"calculate"}, srcA, srcB)
	type row struct {
		Name, Server, Remote string
		Approval             runtime.Approval
	}
	var got []row
	for _, tl := range tools {
		server, remote, _ := mcp.Origin(tl)
		got = append(got, row{tl.Spec().Name, server, remote, policy.For(tl.Spec().Name).Approval})
	}
	ask, auto := runtime.ApprovalAsk, runtime.ApprovalAuto
	want := []row{
		{"a__calculate", "a", "calculate", ask},
		{"only_a", "a", "only_a", auto},
		{"a__search", "a", "search", ask},
		{"a__search_931456a1", "b", "a__search", ask},
		{"b__only_b", "b", "only_b", ask},
		{"b__search", "b", "search", auto},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Merge (-want +got):\n%s", diff)
	}
	if _, err := runtime.New(runtime.Config{Model: &runtimetest.Model{}, Tools: tools}); err != nil {
		t.Errorf("runtime.New: %v", err)
	}
	if out, err := call(t, find(t, tools, "b__search"), `{}`); err != nil || out.Text != "search ran" {
		t.Errorf("b__search: %+v, %v", out, err)
	}
	// Alone, a source keeps its names, but for the ones it reserves.
	if diff := cmp.Diff([]string{"a__search", "b__only_b", "search"}, names(srcB.Tools())); diff != "" {
		t.Errorf("b alone (-want +got):\n%s", diff)
	}
	if _, _, ok := mcp.Origin(runtime.NewTool(runtime.ToolSpec{Name: "x"}, nil)); ok {
		t.Error("Origin of a tool of another kind: ok")
	}
}

func TestReconnect(t *testing.T) {
	s := newMemServer(t)
	s.gate = make(chan struct{})
	s.add("echo", nil, nil)
	src := connect(t, s, mcp.ServerConfig{}, mcp.WithBackoff(time.Millisecond, 10*time.Millisecond))
	tl := find(t, src.Tools(), "echo")
	changed := make(chan struct{}, 10)
	src.OnToolsChanged(func() { changed <- struct{}{} })

	for ss := range s.Sessions() {
		ss.Close()
	}
	eventually(t, "the source sees the session end", func() bool { return src.Err() != nil })
	if !errors.Is(src.Err(), mcp.ErrUnavailable) {
		t.Errorf("Err() = %v, want ErrUnavailable", src.Err())
	}
	_, err := call(t, tl, `{}`)
	if !errors.Is(err, mcp.ErrUnavailable) || !strings.Contains(err.Error(), `server "mem" is reconnecting after: the server closed the session`) {
		t.Errorf("call while down: %v", err)
	}
	// The tools stay offered meanwhile.
	if diff := cmp.Diff([]string{"echo"}, names(src.Tools())); diff != "" {
		t.Errorf("tools while down (-want +got):\n%s", diff)
	}

	s.add("new", nil, nil) // the list the reconnection finds differs
	s.gate <- struct{}{}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no change reported after the reconnection")
	}
	if err := src.Err(); err != nil {
		t.Errorf("Err() after reconnecting = %v", err)
	}
	// The old tool value still works.
	if out, err := call(t, tl, `{}`); err != nil || out.Text != "echo ran" {
		t.Errorf("call after reconnecting: %+v, %v", out, err)
	}
	if n := s.dials.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

func TestReconnectBackoff(t *testing.T) {
	s := newMemServer(t)
	s.add("echo", nil, nil)
	var fail atomic.Bool
	var times []time.Time
	var mu sync.Mutex
	dial := func(ctx context.Context) (sdk.Transport, error) {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		if fail.Load() {
			return nil, errors.New("no route to server")
		}
		return s.dial(ctx)
	}
	src, err := mcp.Connect(t.Context(), mcp.ServerConfig{Name: "mem"}, mcp.WithTransport(dial), mcp.WithLogger(quiet),
		mcp.WithBackoff(10*time.Millisecond, 40*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	fail.Store(true)
	for ss := range s.Sessions() {
		ss.Close()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(times) }
	eventually(t, "five failed reconnections", func() bool { return count() >= 6 })
	if err := src.Err(); !errors.Is(err, mcp.ErrUnavailable) || !strings.Contains(err.Error(), "no route to server") {
		t.Errorf("Err() = %v, want the last failure", err)
	}
	fail.Store(false)
	eventually(t, "the reconnection", func() bool { return src.Err() == nil })

	mu.Lock()
	defer mu.Unlock()
	// Delays 10, 20, 40, 40ms: doubling, bounded.
	for i, min := range []time.Duration{10, 20, 40, 40} {
		if d := times[i+2].Sub(times[i+1]); d < min*time.Millisecond {
			t.Errorf("delay %d was %v, want at least %v", i+1, d, min*time.Millisecond)
		}
	}
}

func TestClose(t *testing.T) {
	s := newMemServer(t)
	s.add("echo", nil, nil)
	src := connect(t, s, mcp.ServerConfig{})
	tl := find(t, src.Tools(), "echo")
	changed := false
	src.OnToolsChanged(func() { changed = true })
	if err := src.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := src.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := call(t, tl, `{}`); !errors.Is(err, mcp.ErrClosed) {
		t.Errorf("call after Close: %v, want ErrClosed", err)
	}
	if !errors.Is(src.Err(), mcp.ErrClosed) {
		t.Errorf("Err() after Close = %v", src.Err())
	}
	if changed {
		t.Error("Close reported a change of tools")
	}
}

func TestConnectErrors(t *testing.T) {
	dial := mcp.WithTransport(func(context.Context) (sdk.Transport, error) { return nil, errors.New("refused") })
	for _, tc := range []struct {
		name string
		cfg  mcp.ServerConfig
		opts []mcp.Option
		want string
	}{
		{"no name", mcp.ServerConfig{Command: "x"}, nil, `mcp server "": name "": want 1 to 64 letters, digits, '_' or '-'`},
		{"bad name", mcp.ServerConfig{Name: "a b", Command: "x"}, nil, `name "a b"`},
		{"neither", mcp.ServerConfig{Name: "s"}, nil, "neither command nor url set; want one"},
		{"both", mcp.ServerConfig{Name: "s", Command: "x", URL: "http://h"}, nil, "both command and url set; want one"},
		{"args without command", mcp.ServerConfig{Name: "s", URL: "http://h", Args: []string{"a"}}, nil, "args, env and dir need a command"},
		{"headers without url", mcp.ServerConfig{Name: "s", Command: "x", Headers: map[string]string{"A": "b"}}, nil, "headers need a url"},
		{"bad url", mcp.ServerConfig{Name: "s", URL: "ftp://h/x"}, nil, "want an http or https URL with a host"},
		{"reserved header", mcp.ServerConfig{Name: "s", URL: "http://h", Headers: map[string]string{"mcp-session-id": "x"}}, nil, "set by the MCP transport itself"},
		{"bad header", mcp.ServerConfig{Name: "s", URL: "http://h", Headers: map[string]string{"a b": "x"}}, nil, "not a valid header name"},
		{"bad env", mcp.ServerConfig{Name: "s", Command: "x", Env: map[string]string{"A=B": "x"}}, nil, "not a valid variable name"},
		{"negative timeout", mcp.ServerConfig{Name: "s", Command: "x", Timeout: -1}, nil, "must not be negative"},
		{"transport and command", mcp.ServerConfig{Name: "s", Command: "x"}, []mcp.Option{dial}, "command or url set along with WithTransport"},
		{"dial fails", mcp.ServerConfig{Name: "s"}, []mcp.Option{dial}, `mcp server "s": refused`},
		{"no such command", mcp.ServerConfig{Name: "s", Command: "/nonexistent/mcp-server"}, nil, "no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := mcp.Connect(t.Context(), tc.cfg, append(tc.opts, mcp.WithLogger(quiet))...)
			if err == nil {
				src.Close()
				t.Fatal("Connect succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Connect: %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}
