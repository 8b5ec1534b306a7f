package agents_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// webServer is an MCP server over streamable HTTP, served in process by the SDK's
// handler. It records the Authorization headers it sees and the arguments delete_file
// gets.
type webServer struct {
	srv *sdk.Server
	url string

	mu      sync.Mutex
	auth    map[string]bool
	deletes []string
}

func newWebServer(t *testing.T) *webServer {
	t.Helper()
	w := &webServer{auth: map[string]bool{}}
	w.srv = sdk.NewServer(&sdk.Implementation{Name: "web", Version: "v1"}, nil)
	w.srv.AddTool(&sdk.Tool{
		Name:        "lookup",
		Description: "Looks a word up.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}},
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var args struct{ Q string }
		json.Unmarshal(req.Params.Arguments, &args)
		return textResult("found " + args.Q), nil
	})
	// No annotations: the tool may do anything, so its calls ask.
	w.srv.AddTool(&sdk.Tool{
		Name:        "delete_file",
		Description: "Deletes a file.",
		InputSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"path": map[string]any{"type": "string"}},
			"required":   []any{"path"},
		},
	}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		w.mu.Lock()
		w.deletes = append(w.deletes, string(req.Params.Arguments))
		w.mu.Unlock()
		var args struct{ Path string }
		json.Unmarshal(req.Params.Arguments, &args)
		return textResult("deleted " + args.Path), nil
	})
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return w.srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.auth[r.Header.Get("Authorization")] = true
		w.mu.Unlock()
		handler.ServeHTTP(rw, r)
	}))
	t.Cleanup(ts.Close)
	w.url = ts.URL
	return w
}

func textResult(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

func (w *webServer) received() ([]string, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var auth []string
	for a := range w.auth {
		auth = append(auth, a)
	}
	slices.Sort(auth)
	return slices.Clone(w.deletes), auth
}

const mcpAgentsFile = `
default_agent: ops
mcp_servers:
  - name: web
    url: WEB_URL
    headers:
      Authorization: Bearer ${AGENTD_TEST_MCP_TOKEN}
    timeout: 5s
  - name: proc
    command: PROC_BIN
    env: {GREETING: "${AGENTD_TEST_GREETING}, world"}
  - name: unused
    command: /nonexistent/never-started
agents:
  - name: ops
    model: script:ops
    tools: [calculate, add]
    mcp_servers: [web, proc]
    policy:
      tools:
        getenv: {approval: always}
        fail: {disabled: true}
        lookup: {approval: ask}
  - name: plain
    model: script:plain
    tools: [calculate]
`

func TestMCPServersListAgents(t *testing.T) {
	t.Setenv("AGENTD_TEST_MCP_TOKEN", "t0ken")
	t.Setenv("AGENTD_TEST_GREETING", "hello")
	web := newWebServer(t)
	path := writeAgentsFile(t, mcpAgentsFile, map[string]string{"WEB_URL": web.url, "PROC_BIN": buildTestServer(t)})
	reg := loadRegistry(t, path, map[string]*rt.Model{"ops": {}, "plain": {}})
	c := servicetest.NewClient(t, service.Config{Agents: reg, Logger: quietLog})

	resp, err := c.ListAgents(t.Context(), &agentdv1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	type tool struct {
		Name, Source              string
		Enabled, RequiresApproval bool
		Timeout                   time.Duration
		HasParams                 bool
	}
	got := map[string][]tool{}
	var lookupParams map[string]any
	for _, a := range resp.GetAgents() {
		for _, ti := range a.GetTools() {
			got[a.GetName()] = append(got[a.GetName()], tool{
				Name: ti.GetSpec().GetName(), Source: ti.GetSource(), Enabled: ti.GetEnabled(),
				RequiresApproval: ti.GetRequiresApproval(), Timeout: ti.GetTimeout().AsDuration(),
				HasParams: ti.GetSpec().GetParameters() != nil,
			})
			if ti.GetSpec().GetName() == "lookup" {
				lookupParams = ti.GetSpec().GetParameters().AsMap()
			}
		}
	}
	const m = time.Minute
	want := map[string][]tool{
		"ops": {
			{"calculate", "builtin", true, false, m, true},
			{"add", "workload", true, false, m, true},
			// web's tools, as it lists them, with its timeout: delete_file asks because no
			// annotation says it is harmless, lookup because the agent says so.
			{"delete_file", "mcp:web", true, true, 5 * time.Second, true},
			{"lookup", "mcp:web", true, true, 5 * time.Second, true},
			// proc's tools: add clashes with the catalogue tool and is namespaced.
			{"proc__add", "mcp:proc", true, false, m, true},
			{"add_tool", "mcp:proc", true, true, m, true},
			{"echo", "mcp:proc", true, false, m, true},
			{"exit", "mcp:proc", true, true, m, true},
			{"fail", "mcp:proc", false, true, m, true},
			{"getenv", "mcp:proc", true, true, m, true},
			{"image", "mcp:proc", true, false, m, true},
			{"pid", "mcp:proc", true, false, m, true},
			{"sleep", "mcp:proc", true, false, m, true},
		},
		"plain": {{"calculate", "builtin", true, false, m, true}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListAgents tools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}, lookupParams); diff != "" {
		t.Errorf("lookup's parameters (-want +got):\n%s", diff)
	}

	// getenv asks always: the agent's entry replaces the annotations' auto.
	e, err := reg.Agent("ops")
	if err != nil {
		t.Fatal(err)
	}
	if p := e.Runtime.Policy().For("getenv"); p.Approval != runtime.ApprovalAlways {
		t.Errorf("getenv's policy %+v, want ApprovalAlways", p)
	}
	// The header's ${VAR} was expanded from agentd's environment.
	if _, auth := web.received(); !slices.Equal(auth, []string{"Bearer t0ken"}) {
		t.Errorf("Authorization headers seen: %q, want [Bearer t0ken]", auth)
	}
}

// TestMCPToolApprovedWithEditedArguments is the end-to-end case: a model calls
// an MCP tool that needs an approval, the client approves with other arguments, and the
// MCP server gets those.
func TestMCPToolApprovedWithEditedArguments(t *testing.T) {
	t.Setenv("AGENTD_TEST_MCP_TOKEN", "t0ken")
	t.Setenv("AGENTD_TEST_GREETING", "hello")
	web := newWebServer(t)
	path := writeAgentsFile(t, mcpAgentsFile, map[string]string{"WEB_URL": web.url, "PROC_BIN": buildTestServer(t)})
	model := &rt.Model{Steps: []rt.Step{
		rt.Call(0, "delete_file", `{"path":"/srv/important.db"}`, "echo", `{"text":"checked"}`),
		rt.Say("done"),
		rt.Call(0, "getenv", `{"name":"GREETING"}`),
		rt.Say("greeted"),
	}}
	reg := loadRegistry(t, path, map[string]*rt.Model{"ops": model, "plain": {}})
	c := servicetest.NewClient(t, service.Config{Agents: reg, Logger: quietLog})

	s := servicetest.Open(t, c, servicetest.Input("ops", "clean up"))
	req := s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil }).GetApprovalRequested()
	if req.GetToolName() != "delete_file" || req.GetArgumentsJson() != `{"path":"/srv/important.db"}` || !req.GetEditable() {
		t.Fatalf("approval requested: %v", req)
	}
	edited, _ := structpb.NewValue(map[string]any{"path": "/tmp/scratch.txt"})
	s.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
		ApprovalId: req.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, EditedArguments: edited,
	}}})
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("run finished %v, %v; events:\n%s", fin.GetReason(), err, servicetest.Render(s.Events()))
	}
	results := map[string]string{}
	for _, ev := range s.Events() {
		if r := ev.GetToolCallResult(); r != nil {
			results[r.GetName()] = r.GetText()
		}
	}
	if diff := cmp.Diff(map[string]string{"delete_file": "deleted /tmp/scratch.txt", "echo": "checked"}, results); diff != "" {
		t.Errorf("tool results (-want +got):\n%s", diff)
	}
	if deletes, _ := web.received(); !slices.Equal(deletes, []string{`{"path":"/tmp/scratch.txt"}`}) {
		t.Errorf("the MCP server got %q, want the edited arguments only", deletes)
	}

	// The stdio server's environment has the variable, expanded from agentd's.
	s = servicetest.Open(t, c, servicetest.Input("ops", "greet"))
	req = s.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil }).GetApprovalRequested()
	s.Send(servicetest.Approve(req.GetApprovalId()))
	if fin, err := s.Finish(); err != nil || fin.GetFinalText() != "greeted" {
		t.Fatalf("run finished %v, %v", fin, err)
	}
	if rs := toolResults(s.Events()); len(rs) != 1 || rs[0].GetText() != "hello, world" {
		t.Errorf("results %v, want one: getenv GREETING = %q", rs, "hello, world")
	}
}

func TestMCPToolsChangedRebuildsTheAgent(t *testing.T) {
	web := newWebServer(t)
	path := writeAgentsFile(t, `
mcp_servers:
  - name: web
    url: WEB_URL
agents:
  - name: ops
    model: script:ops
    tools: [calculate]
    mcp_servers: [web]
  - name: plain
    model: script:plain
`, map[string]string{"WEB_URL": web.url})
	model := &rt.Model{Steps: []rt.Step{rt.Call(0, "fresh", `{}`), rt.Say("used the new tool")}}
	reg := loadRegistry(t, path, map[string]*rt.Model{"ops": model, "plain": {}})
	c := servicetest.NewClient(t, service.Config{Agents: reg, Logger: quietLog})

	before, err := reg.Agent("ops")
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := reg.Agent("plain")
	web.srv.AddTool(&sdk.Tool{Name: "fresh", Description: "New.", InputSchema: map[string]any{"type": "object"}, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return textResult("fresh result"), nil
		})

	var after *runs.Agent
	deadline := time.Now().Add(10 * time.Second)
	for {
		after, err = reg.Agent("ops")
		if err != nil {
			t.Fatal(err)
		}
		if hasTool(after, "fresh") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent was not rebuilt with the new tool")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if hasTool(before, "fresh") {
		t.Error("the entry taken before the change changed: runs going must keep their agent")
	}
	if p, _ := reg.Agent("plain"); p != plain {
		t.Error("an agent without the server was rebuilt")
	}
	if d := defaultOf(t, reg); d.Name != "ops" || !hasTool(d, "fresh") {
		t.Errorf("Agent(\"\") = %s without the new tool, want the new ops", d.Name)
	}
	for _, ti := range after.Tools {
		if ti.Spec.Name == "fresh" && (ti.Source != "mcp:web" || ti.Policy.Approval != runtime.ApprovalAuto) {
			t.Errorf("the new tool: %+v", ti)
		}
	}

	s := servicetest.Open(t, c, servicetest.Input("ops", "use it"))
	fin, err := s.Finish()
	if err != nil || fin.GetFinalText() != "used the new tool" {
		t.Fatalf("run finished %v, %v", fin, err)
	}
	var result string
	for _, ev := range s.Events() {
		if r := ev.GetToolCallResult(); r != nil {
			result = r.GetText()
		}
	}
	if result != "fresh result" {
		t.Errorf("fresh's result %q, want %q", result, "fresh result")
	}
}

// TestMCPRegistryConcurrentReads reads the registry while its agents are rebuilt, for
// the race detector.
func TestMCPRegistryConcurrentReads(t *testing.T) {
	web := newWebServer(t)
	path := writeAgentsFile(t, "mcp_servers: [{name: web, url: WEB_URL}]\nagents: [{name: ops, model: demo, mcp_servers: [web]}]\n", map[string]string{"WEB_URL": web.url})
	reg := loadRegistry(t, path, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				e, err := reg.Agent("")
				if err != nil || e.Runtime == nil || len(reg.List()) != 1 {
					t.Errorf("Agent: %v, %v", e, err)
					return
				}
			}
		})
	}
	for i := range 5 {
		name := "t" + string(rune('a'+i))
		web.srv.AddTool(&sdk.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return textResult(name), nil })
	}
	deadline := time.Now().Add(10 * time.Second)
	for e := defaultOf(t, reg); !hasTool(e, "te"); e = defaultOf(t, reg) {
		if time.Now().After(deadline) {
			t.Error("the agent was not rebuilt with the new tools")
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	// Three built-in tools, lookup, delete_file and five new ones.
	if n := len(defaultOf(t, reg).Tools); n != 10 {
		t.Errorf("%d tools, want 10", n)
	}
}

func TestMCPConfigErrors(t *testing.T) {
	web := newWebServer(t)
	// A server that never answers. The client does not cancel its initialize request
	// when the connect timeout passes (see package mcp), so the test lets it go.
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			return // the client closing the session: no need to wait 5s for it
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) })
	vars := map[string]string{"WEB_URL": web.url, "HANG_URL": hang.URL}
	tests := []struct {
		name string
		file string
		want []string // the error's lines, after the file name
	}{
		{"unknown server", `agents:
  - name: ops
    model: demo
    mcp_servers: [web]
`, []string{`:4: agent "ops": mcp_servers[0]: no mcp server named "web" in the file's mcp_servers (none)`}},
		{"server listed twice", `mcp_servers: [{name: web, url: WEB_URL}]
agents:
  - name: ops
    model: demo
    mcp_servers: [web, web]
`, []string{`:5: agent "ops": mcp_servers[1]: mcp server "web" listed twice`}},
		{"unknown field", `mcp_servers:
  - name: fs
    comand: mcp-server-filesystem
agents: [{name: ops, model: demo}]
`, []string{`:3: mcp_servers[0]: unknown field "comand"; known fields: name, command, args, env, dir, url, headers, timeout, approval`}},
		{"duplicate name and bad fields", `mcp_servers:
  - name: web
    url: WEB_URL
  - name: web
    command: x
    url: WEB_URL
    approval: sometimes
    timeout: -1s
agents: [{name: ops, model: demo}]
`, []string{
			`:4: mcp_servers[1].name: duplicate mcp server name "web": mcp_servers[0] has it too`,
			`:7: mcp_servers[1].approval: invalid approval "sometimes": want auto, ask or always`,
			`:8: mcp_servers[1].timeout: must not be negative, got -1s`,
		}},
		{"negative timeout", `mcp_servers:
  - name: web
    url: WEB_URL
    timeout: -1s
agents: [{name: ops, model: demo}]
`, []string{`:4: mcp_servers[0].timeout: must not be negative, got -1s`}},
		{"both command and url", `mcp_servers:
  - name: web
    command: x
    url: WEB_URL
agents: [{name: ops, model: demo}]
`, []string{`:2: mcp_servers[0]: mcp server "web": both command and url set; want one`}},
		{"unset variable", `mcp_servers:
  - name: web
    url: WEB_URL
    headers:
      Authorization: Bearer ${AGENTD_TEST_UNSET_TOKEN}
agents: [{name: ops, model: demo}]
`, []string{`:5: mcp_servers[0].headers.Authorization: ${AGENTD_TEST_UNSET_TOKEN}: the variable AGENTD_TEST_UNSET_TOKEN is not set`}},
		{"policy names a tool no server offers", `mcp_servers: [{name: web, url: WEB_URL}]
agents:
  - name: ops
    model: demo
    tools: [calculate]
    mcp_servers: [web]
    policy:
      tools:
        lookup: {approval: always}
        lokup: {disabled: true}
`, []string{`:10: agent "ops": policy.tools.lokup: tool "lokup" is not one of the agent's tools (calculate, delete_file, lookup)`}},
		{"server cannot be started", `mcp_servers: [{name: ghost, command: /nonexistent/mcp-server}]
agents: [{name: ops, model: demo, mcp_servers: [ghost]}]
`, []string{`:1: mcp_servers[0]: mcp server "ghost": connect: `}},
		{"server does not answer", `mcp_servers:
  - {name: web, url: WEB_URL}
  - {name: slow, url: HANG_URL}
agents: [{name: ops, model: demo, mcp_servers: [web, slow]}]
`, []string{`:3: mcp_servers[1]: mcp server "slow": connect: context deadline exceeded (the connect timeout is 1s)`}},
		{"http_fetch without hosts", `agents:
  - name: ops
    model: demo
    tools: [calculate, http_fetch]
`, []string{`:4: agent "ops": tools[1]: http_fetch needs the hosts it may fetch from: add http_fetch: {allow_hosts: [example.com, "*.example.com"]} to the agent`}},
		{"http_fetch with an empty list", `agents:
  - name: ops
    model: demo
    tools: [http_fetch]
    http_fetch: {allow_hosts: []}
`, []string{`:4: agent "ops": tools[0]: http_fetch needs the hosts it may fetch from`}},
		{"http_fetch configured, not a tool", `agents:
  - name: ops
    model: demo
    tools: [calculate]
    http_fetch: {allow_hosts: [example.com]}
`, []string{`:5: agent "ops": http_fetch: http_fetch is configured but not among the agent's tools; add it to tools`}},
		{"http_fetch bad fields", `agents:
  - name: ops
    model: demo
    tools: [http_fetch]
    http_fetch:
      allow_hosts: [example.com, "https://example.org/"]
      max_bytes: -1
      timeout: 1x
`, []string{`:8: agent "ops": http_fetch.timeout: invalid duration "1x"`}},
		{"http_fetch bad host", `agents:
  - name: ops
    model: demo
    tools: [http_fetch]
    http_fetch:
      allow_hosts: [example.com, "https://example.org/"]
      max_bytes: -1
`, []string{
			`:6: agent "ops": http_fetch.allow_hosts: http_fetch: allow_hosts[1] "https://example.org/": want a host name such as example.com or *.example.com, not a URL`,
			`:7: agent "ops": http_fetch.max_bytes: must not be negative, got -1`,
		}},
		{"http_fetch unknown field", `agents:
  - name: ops
    model: demo
    tools: [http_fetch]
    http_fetch:
      allow_hosts: [example.com]
      max_size: 10
`, []string{`:7: agent "ops": http_fetch: unknown field "max_size"; known fields: allow_hosts, max_bytes, timeout`}},
		{"max_tool_output_bytes", `agents:
  - name: ops
    model: demo
    max_tool_output_bytes: -2
`, []string{`:4: agent "ops": max_tool_output_bytes: must be -1 (no limit), 0 (the default, 64 KiB) or positive, got -2`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeAgentsFile(t, tt.file, vars)
			var err error
			cfg, err := agents.LoadFile(path)
			if err == nil {
				var reg *agents.Registry
				reg, err = agents.NewRegistry(cfg, agents.RegistryOptions{Logger: quietLog, MCPConnectTimeout: time.Second})
				if err == nil {
					reg.Close()
				}
			}
			if err == nil {
				t.Fatal("no error")
			}
			checkErrorLines(t, err, path, tt.want)
		})
	}
}

// TestMCPConnectErrorKeepsSecrets checks that a server's header values stay out of the
// errors, whatever goes wrong.
func TestMCPConnectErrorKeepsSecrets(t *testing.T) {
	t.Setenv("AGENTD_TEST_MCP_TOKEN", "s3cret-t0ken")
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "go away", http.StatusForbidden)
	}))
	t.Cleanup(refuse.Close)
	path := writeAgentsFile(t, `mcp_servers:
  - name: web
    url: URL
    headers: {Authorization: "Bearer ${AGENTD_TEST_MCP_TOKEN}"}
agents: [{name: ops, model: demo, mcp_servers: [web]}]
`, map[string]string{"URL": refuse.URL})
	cfg, err := agents.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cfg.MCPServers[0].Headers["Authorization"], "s3cret") {
		t.Error("the loaded config holds the secret; want the reference, expanded when connecting")
	}
	_, err = agents.NewRegistry(cfg, agents.RegistryOptions{Logger: quietLog, MCPConnectTimeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), `mcp server "web"`) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %v: want one naming the server, without the token", err)
	}
}

func TestHTTPFetchAgent(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(strings.Repeat("x", 500)))
	}))
	t.Cleanup(page.Close)
	path := writeAgentsFile(t, `agents:
  - name: web
    model: script:web
    tools: [http_fetch]
    http_fetch: {allow_hosts: [127.0.0.1], max_bytes: 100, timeout: 5s}
    max_tool_output_bytes: 120
`, nil)
	model := &rt.Model{Steps: []rt.Step{
		rt.Call(0, "http_fetch", `{"url":"`+page.URL+`/a"}`, "http_fetch", `{"url":"http://localhost/"}`),
		rt.Say("fetched"),
	}}
	reg := loadRegistry(t, path, map[string]*rt.Model{"web": model})
	e := defaultOf(t, reg)
	if diff := cmp.Diff([]toolSummary{{Name: "http_fetch", Source: "builtin", Approval: runtime.ApprovalAsk, Timeout: time.Minute}}, agentSummaryOf(e).Tools); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	approveAll := func(context.Context, runtime.ApprovalRequest) (runtime.Decision, error) {
		return runtime.Decision{Outcome: runtime.OutcomeApproved}, nil
	}
	fin := runAgent(t, e, &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("fetch")}, Approve: approveAll})
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("run finished %s (%v)", fin.Reason, fin.Err)
	}
	var outs []runtime.Output
	for _, m := range fin.NewMessages {
		for _, p := range m.Parts {
			if p.Kind == runtime.PartToolResult {
				outs = append(outs, p.ToolResult.Output)
			}
		}
	}
	if len(outs) != 2 {
		t.Fatalf("%d tool results, want 2", len(outs))
	}
	// The tool cut the body at 100 bytes; the agent's limit cut the result at 120.
	if o := outs[0]; o.IsError || !strings.HasPrefix(o.Text, `{"url":"`+page.URL+`/a","status":200,"content_type":"text/plain","body":"xxx`) ||
		!strings.Contains(o.Text, "[the output was ") || !strings.Contains(o.Text, "only the first 120 are shown") {
		t.Errorf("allowed fetch: %+v", o)
	}
	if o := outs[1]; !o.IsError || !strings.Contains(o.Text, `host not allowed: "localhost" is not on the allow-list (127.0.0.1)`) {
		t.Errorf("refused fetch: %+v", o)
	}
}
