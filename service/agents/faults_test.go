package agents_test

// What an agent depends on fails under a run: an MCP server killed in the middle of a
// call, a remote hook that cannot be reached. The run goes on, or stops, as the agents
// file says; it never hangs.

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service/servicetest"
)

func TestFault_MCPServerKilledMidCall(t *testing.T) {
	servicetest.CheckNoLeak(t)
	const agents = `
mcp_servers:
  - name: proc
    command: PROC_BIN
    timeout: 30s
agents:
  - name: ops
    model: script:ops
    tools: []
    mcp_servers: [proc]
`
	// The first run learns the server's pid, then calls a tool that sleeps a minute;
	// the test kills the server once that call is under way. The model then answers.
	// Later runs call echo until the restarted server answers.
	steps := []rt.Step{
		rt.Call(0, "pid", `{}`),
		rt.Call(0, "sleep", `{"millis":60000}`),
		rt.Say("carried on"),
	}
	for range 50 {
		steps = append(steps, rt.Call(0, "echo", `{"text":"back"}`), rt.Say("echoed"))
	}
	model := &rt.Model{Steps: steps}
	path := writeAgentsFile(t, agents, map[string]string{"PROC_BIN": buildTestServer(t)})
	c := serveAgents(t, loadRegistry(t, path, map[string]*rt.Model{"ops": model}))

	s := servicetest.Open(t, c, servicetest.Input("ops", "sleep on it"))
	var pid int
	s.Until(func(ev *agentdv1.RunEvent) bool {
		if r := ev.GetToolCallResult(); r != nil && r.GetName() == "pid" {
			var err error
			if pid, err = strconv.Atoi(r.GetText()); err != nil {
				t.Fatalf("pid result %q", r.GetText())
			}
		}
		return ev.GetToolExecutionStarted().GetName() == "sleep"
	})
	if pid == 0 {
		t.Fatal("no pid before the sleep call")
	}
	// The call is under way when the server has read it; give the request a moment to
	// reach the process before killing it.
	time.Sleep(50 * time.Millisecond)
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
	fin, err := s.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || fin.GetFinalText() != "carried on" {
		t.Fatalf("finished %v %q, %v; want completed by the model after an error result\n%s", fin.GetReason(), fin.GetFinalText(), err, servicetest.Render(s.Events()))
	}
	t.Logf("the run finished %s after the kill", time.Since(killed))
	rs := toolResults(s.Events())
	if len(rs) != 2 || rs[1].GetName() != "sleep" || !rs[1].GetIsError() || rs[1].GetText() == "" {
		t.Fatalf("results %v; want the sleep call to end in an error result", rs)
	}
	t.Logf("the model read: %s", rs[1].GetText())
	// The transcript keeps the call and its error result.
	var inTranscript bool
	for _, m := range fin.GetNewMessages() {
		for _, p := range m.GetParts() {
			if r := p.GetToolResult(); r != nil && r.GetToolCallId() == rs[1].GetToolCallId() && r.GetIsError() {
				inTranscript = true
			}
		}
	}
	if !inTranscript {
		t.Errorf("the transcript lacks the failed call's result: %v", fin.GetNewMessages())
	}

	// The server is restarted with backoff; calls fail as error results meanwhile.
	deadline := time.Now().Add(20 * time.Second)
	for attempt := 1; ; attempt++ {
		s := servicetest.Open(t, c, servicetest.Input("ops", "echo"))
		fin, err := s.Finish()
		if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
			t.Fatalf("attempt %d: finished %v, %v", attempt, fin.GetReason(), err)
		}
		rs := toolResults(s.Events())
		if len(rs) != 1 {
			t.Fatalf("attempt %d: results %v", attempt, rs)
		}
		if !rs[0].GetIsError() {
			if rs[0].GetText() != "back" {
				t.Fatalf("echo after the restart: %q", rs[0].GetText())
			}
			t.Logf("the restarted server answered %s after the kill (attempt %d)", time.Since(killed).Round(time.Millisecond), attempt)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server was not restarted within 20s; last result: %s", rs[0].GetText())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestFault_RemoteHookUnreachable(t *testing.T) {
	// refused is an address nothing listens on; silent accepts connections and never
	// answers, so a call gets no answer within the hook's timeout.
	refused := func(t *testing.T) string {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := lis.Addr().String()
		lis.Close()
		return addr
	}
	silent := func(t *testing.T) string {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for {
				c, err := lis.Accept()
				if err != nil {
					return
				}
				conns = append(conns, c)
			}
		}()
		t.Cleanup(func() { lis.Close(); <-done })
		return lis.Addr().String()
	}
	for _, srv := range []struct {
		name string
		addr func(t *testing.T) string
		want string
	}{
		{"connection refused", refused, "hook unreachable: BeforeTool: connection error"},
		{"no answer", silent, "hook unreachable: BeforeTool: no answer within 300ms"},
	} {
		for _, failClosed := range []bool{false, true} {
			mode := "fail-open"
			if failClosed {
				mode = "fail-closed"
			}
			t.Run(srv.name+"/"+mode, func(t *testing.T) {
				servicetest.CheckNoLeak(t)
				agents := fmt.Sprintf(`
agents:
  - name: guarded
    model: script:guarded
    tools: [calculate]
    hooks:
      remote:
        - address: %s
          points: [before_tool]
          timeout: 300ms
          fail_closed: %t
`, srv.addr(t), failClosed)
				model := &rt.Model{Steps: []rt.Step{rt.Call(0, "calculate", `{"expression":"1+1"}`), rt.Say("2")}}
				path := writeAgentsFile(t, agents, nil)
				c := serveAgents(t, loadRegistry(t, path, map[string]*rt.Model{"guarded": model}))
				start := time.Now()
				s := servicetest.Open(t, c, servicetest.Input("guarded", "what is 1+1?"))
				fin, err := s.Finish()
				t.Logf("the run took %s", time.Since(start).Round(time.Millisecond))
				if !failClosed {
					if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || fin.GetFinalText() != "2" {
						t.Fatalf("finished %v %q (%v), %v; fail-open goes on as if the hook had said continue", fin.GetReason(), fin.GetFinalText(), fin.GetError(), err)
					}
					if rs := toolResults(s.Events()); len(rs) != 1 || rs[0].GetIsError() || rs[0].GetJson().GetStructValue().GetFields()["result"].GetNumberValue() != 2 {
						t.Errorf("results %v; want the tool to have run", rs)
					}
					return
				}
				if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_STOPPED || !strings.Contains(fin.GetError().GetMessage(), srv.want) {
					t.Fatalf("finished %v (%v), %v; want stopped with %q", fin.GetReason(), fin.GetError(), err, srv.want)
				}
				if rs := toolResults(s.Events()); len(rs) != 0 {
					t.Errorf("results %v; the tool must not run when the hook cannot say yes", rs)
				}
				if n := len(fin.GetNewMessages()); n < 2 {
					t.Errorf("the transcript has %d messages; want the input and the model's call kept", n)
				}
			})
		}
	}
}
