package main

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/logtest"
)

// plain returns the flags that reach the shared agentd.
func plain(t *testing.T) []string {
	return []string{"--addr", sharedAgentd(t), "--plaintext"}
}

// cmdLine is the command line agentctl prints for rest, run against the shared agentd as
// plain gives it: the connection flags first, so that it works as printed.
func cmdLine(t *testing.T, rest ...string) string {
	return "agentctl " + strings.Join(args(plain(t), rest...), " ")
}

func args(pre []string, rest ...string) []string {
	return append(append([]string(nil), pre...), rest...)
}

// wantOutput fails the test unless out holds every one of wants.
func wantOutput(t *testing.T, r result, code int, wants ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d", r.code, code)
	}
	for _, w := range wants {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("stdout lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("%s", r)
	}
}

func TestAgents(t *testing.T) {
	t.Parallel()
	r := ctl{}.run(t, args(plain(t), "agents")...)
	wantOutput(t, r, exitOK, "demo  demo:agentd-demo  max 25 steps  (default: runs when no --agent is given)\n", "tools: current_time, calculate, save_note (needs approval)\n")

	r = ctl{}.run(t, args(plain(t), "agents", "--json")...)
	var resp agentdv1.ListAgentsResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &resp); err != nil || r.code != exitOK {
		t.Fatalf("agents --json: %v\n%s", err, r)
	}
	if n := len(resp.GetAgents()); n != 1 || resp.GetAgents()[0].GetName() != "demo" {
		t.Errorf("agents --json = %v, want the demo agent alone", &resp)
	}
}

func TestRunStreamsAnswerAndUsage(t *testing.T) {
	t.Parallel()
	// Flags after the prompt, and the connection flags after the command, work too.
	r := ctl{}.run(t, append([]string{"run", "what is 12*7?", "--agent", "demo"}, plain(t)...)...)
	wantOutput(t, r, exitOK,
		"⚙ calculate {\"expression\":\"12*7\"}\n",
		"  → {\"expression\":\"12*7\",\"result\":84}",
		"\n12*7 = 84\n",
		"✓ completed · 2 model calls · 1 tool call · ",
		" tokens in, ",
	)
	if r.stderr != "" {
		t.Errorf("stderr = %q, want nothing", r.stderr)
	}
}

func TestRunApprovalAtThePrompt(t *testing.T) {
	t.Parallel()
	editor := ""
	if runtime.GOOS != "windows" {
		editor = filepath.Join(t.TempDir(), "editor.sh")
		script := "#!/bin/sh\nsed 's/milk/bread/g' \"$1\" > \"$1.new\" && mv \"$1.new\" \"$1\"\n"
		if err := os.WriteFile(editor, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		stdin  string
		editor string
		want   []string
	}{
		{"approve", "y\n", "", []string{
			"? save_note needs your approval",
			"approve save_note? [y]es/[n]o/[e]dit: y\n",
			"✓ save_note approved\n",
			"Saved your note \"Buy milk\"",
			"✓ completed · 2 model calls · 1 tool call",
		}},
		{"deny with a reason on the line", "n not now\n", "", []string{
			"✗ save_note denied (not now)\n",
			"denied: not now",
			"Nothing was saved.",
		}},
		{"deny: piped, n asks no reason", "n\n", "", []string{
			"✗ save_note denied\n",
			"Nothing was saved.",
		}},
		{"edit inline", "e\n{\"title\": \"Oat milk\", \"text\": \"buy oat milk\"}\n", "", []string{
			"the arguments as JSON on one line",
			"✓ save_note approved with {",
			"Saved your note \"Oat milk\"",
		}},
		{"edit in the editor", "e\n", editor, []string{
			"✓ save_note approved with {",
			"Saved your note \"Buy bread\"",
		}},
		{"asked again after a wrong answer", "maybe\nyes\n", "", []string{
			"answer y to approve, n to deny, or e to edit the arguments\n",
			"✓ save_note approved\n",
		}},
		{"edited arguments the server refuses", "e\n{\"title\": 5}\ny\n", "", []string{
			"✗ decision on save_note refused: INVALID_ARGUMENTS: ",
			"✓ save_note approved\n",
			"Saved your note \"Buy milk\"",
		}},
		{"invalid JSON asked again", "e\n{oops\n\n", "", []string{
			"not valid JSON",
			"✓ save_note approved\n",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.name == "edit in the editor" && editor == "" {
				t.Skip("needs sh")
			}
			c := ctl{stdin: strings.NewReader(tc.stdin), env: map[string]string{"EDITOR": tc.editor}}
			r := c.run(t, args(plain(t), "run", "save a note: buy milk")...)
			wantOutput(t, r, exitOK, tc.want...)
		})
	}
}

func TestRunJSON(t *testing.T) {
	t.Parallel()
	r := ctl{}.run(t, args(plain(t), "run", "--json", "what is 12*7?")...)
	if r.code != exitOK {
		t.Fatalf("%s", r)
	}
	evs := parseNDJSON(t, r.stdout)
	if evs[0].GetRunStarted() == nil {
		t.Errorf("first event %v, want run_started", evs[0])
	}
	last := evs[len(evs)-1].GetRunFinished()
	if last == nil || last.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || last.GetFinalText() != "12*7 = 84" {
		t.Errorf("last event %v, want run_finished COMPLETED with 12*7 = 84", evs[len(evs)-1])
	}
	for i, ev := range evs {
		if ev.GetSeq() != int64(i+1) {
			t.Errorf("event %d has seq %d", i, ev.GetSeq())
		}
	}
}

// parseNDJSON parses one RunEvent a line.
func parseNDJSON(t *testing.T, out string) []*agentdv1.RunEvent {
	t.Helper()
	var evs []*agentdv1.RunEvent
	for l := range strings.Lines(out) {
		ev := &agentdv1.RunEvent{}
		if err := protojson.Unmarshal([]byte(l), ev); err != nil {
			t.Fatalf("line %d %q: %v", len(evs)+1, l, err)
		}
		evs = append(evs, ev)
	}
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	return evs
}

func TestParkAndResume(t *testing.T) {
	t.Parallel()
	save := filepath.Join(t.TempDir(), "parked.json")
	// Input ends at once: the run parks at the approval.
	r := ctl{}.run(t, args(plain(t), "run", "--save", save, "save a note: buy milk")...)
	wantOutput(t, r, exitParked,
		"end of input: the run parks with 1 approval waiting\n",
		"⏸ awaiting input · 1 model call · 0 tool calls",
		"waiting for: approval of save_note\n",
		"saved to "+save+"; resume with: "+cmdLine(t, "run", "--resume", save)+"\n",
	)
	p, err := loadParked(save)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.PendingApprovals) != 1 || p.PendingApprovals[0].GetToolName() != "save_note" || len(p.Messages) != 1 || p.Agent != "demo" || p.ThreadID == "" {
		t.Errorf("saved %+v, want the user's message and one pending save_note approval", p)
	}
	if fi, err := os.Stat(save); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("save file: %v, mode %v; want 0600", err, fi.Mode())
	}

	r = ctl{stdin: strings.NewReader("y\n")}.run(t, args(plain(t), "run", "--resume", save)...)
	wantOutput(t, r, exitOK,
		"● parked run "+p.RunID+" · agent demo · thread "+p.ThreadID,
		"approve save_note? [y]es/[n]o/[e]dit: y\n",
		"● resumed run ",
		"✓ save_note approved\n",
		"Saved your note \"Buy milk\"",
		"removed "+save+": its run was resumed",
	)
	if strings.Count(r.stdout, "approve save_note?") != 1 {
		t.Errorf("asked more than once:\n%s", r.stdout)
	}
	if _, err := os.Stat(save); !os.IsNotExist(err) {
		t.Errorf("the resumed file is still there (%v): resuming it again would save the note twice", err)
	}
}

func TestParkDefaultFileAndDenyOnResume(t *testing.T) {
	t.Chdir(t.TempDir())
	r := ctl{}.run(t, args(plain(t), "run", "save a note: call mum")...)
	wantOutput(t, r, exitParked, "saved to agentctl-parked.json; resume with: "+cmdLine(t, "run", "--resume", "agentctl-parked.json")+"\n")
	r = ctl{}.run(t, args(plain(t), "run", "--resume", "agentctl-parked.json", "--deny", "changed my mind")...)
	wantOutput(t, r, exitOK, "✗ save_note denied (changed my mind)\n", "Nothing was saved.")
}

func TestJSONParksAndResumes(t *testing.T) {
	t.Parallel()
	save := filepath.Join(t.TempDir(), "parked.json")
	r := ctl{}.run(t, args(plain(t), "run", "--json", "--save", save, "save a note: buy milk")...)
	if r.code != exitParked || !strings.Contains(r.stderr, "saved to "+save) {
		t.Fatalf("%s", r)
	}
	evs := parseNDJSON(t, r.stdout)
	if f := evs[len(evs)-1].GetRunFinished(); f.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT || len(f.GetPendingApprovals()) != 1 {
		t.Errorf("last event %v, want run_finished AWAITING_INPUT with one approval", evs[len(evs)-1])
	}

	r = ctl{}.run(t, args(plain(t), "run", "--json", "--resume", save)...)
	if r.code != exitUsage || !strings.Contains(r.stderr, "decide with --approve or --deny") {
		t.Errorf("--json --resume without a decision: %s", r)
	}

	r = ctl{}.run(t, args(plain(t), "run", "--json", "--resume", save, "--approve")...)
	if r.code != exitOK {
		t.Fatalf("%s", r)
	}
	evs = parseNDJSON(t, r.stdout)
	if !evs[0].GetRunStarted().GetResumed() {
		t.Errorf("first event %v, want a resumed run_started", evs[0])
	}
	if f := evs[len(evs)-1].GetRunFinished(); !strings.HasPrefix(f.GetFinalText(), "Saved your note \"Buy milk\"") {
		t.Errorf("last event %v, want the note saved", evs[len(evs)-1])
	}
}

func TestCtrlCCancels(t *testing.T) {
	t.Parallel()
	in, answer := io.Pipe()
	defer answer.Close()
	c := ctl{stdin: in, interrupts: make(chan os.Signal, 1), stdout: &logtest.Buffer{}}
	done := make(chan result, 1)
	a := args(plain(t), "run", "save a note: buy milk")
	go func() { done <- c.run(t, a...) }()
	waitFor(t, c.stdout, "approve save_note?")
	c.interrupts <- os.Interrupt
	r := <-done
	wantOutput(t, r, exitCancel,
		"cancelling the run (Ctrl-C again quits)\n",
		"⊘ save_note: approval cancelled",
		"⊘ cancelled · 1 model call",
	)
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"run"}, "run needs a prompt"},
		{[]string{"run", "--resume", "f.json", "hello"}, "--resume takes no prompt"},
		{[]string{"run", "--approve", "hello"}, "use them with --resume"},
		{[]string{"run", "--plaintext", "--cacert", "ca.pem", "hello"}, "--plaintext goes with none of the TLS flags"},
		{[]string{"-H", "nocolon", "agents"}, `header "nocolon"`},
		{[]string{"agents", "extra"}, "agents takes no arguments"},
		{[]string{"run", "--resume", filepath.Join(t.TempDir(), "missing.json")}, "no such file"},
		{[]string{"run", "--history", "server", "hello"}, "want client or thread"},
		{[]string{"run", "--history", "thread", "--resume", "f.json"}, "--resume takes no --history"},
		{[]string{"run", "--output-schema", "[1]", "hello"}, "--output-schema: want a JSON Schema, a JSON object"},
		{[]string{"run", "--output-schema", `{"type":"object"}`, "--resume", "f.json"}, "--resume takes no --output-schema"},
		{[]string{"attach"}, "attach takes one run id"},
		{[]string{"attach", "run_1", "run_2"}, "attach takes one run id"},
		{[]string{"attach", "run_1", "--after", "-1"}, "--after must not be negative"},
		{[]string{"chat", "hello"}, "chat takes no arguments"},
		{[]string{"threads", "show"}, "threads show takes one thread id"},
		{[]string{"threads", "delete", "a", "b"}, "threads delete takes one thread id"},
		{[]string{"threads", "purge"}, `threads ["purge"]`},
	} {
		r := ctl{}.run(t, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("agentctl %q: %s\nwant exit %d and %q", tc.args, r, exitUsage, tc.want)
		}
	}
	r := ctl{}.run(t, "-h")
	if r.code != exitOK || !strings.Contains(r.stdout, "Usage:\n  agentctl [connection flags] agents") || !strings.Contains(r.stdout, "-plaintext") || !strings.Contains(r.stdout, "-resume file") ||
		!strings.Contains(r.stdout, "-after seq") || !strings.Contains(r.stdout, "agentctl [connection flags] threads [list | show ID | delete ID]") {
		t.Errorf("-h: %s", r)
	}
}

// --version prints agentctl's version line and needs no server.
func TestVersion(t *testing.T) {
	r := ctl{}.run(t, "--version")
	wantOutput(t, r, exitOK, "agentctl ")
}

// --auto-approve asks nothing of what the run's policy approves, and still asks what it
// leaves to the person: a tool whose approval is always.
func TestAutoApproveAsksOnlyWhatThePolicyLeaves(t *testing.T) {
	t.Parallel()
	r := ctl{}.run(t, args(plain(t), "run", "--auto-approve", "save a note: buy milk")...)
	wantOutput(t, r, exitOK, "✓ save_note approved by the approval policy\n", "Saved your note \"Buy milk\"")
	if strings.Contains(r.stdout, "needs your approval") || strings.Contains(r.stdout, "approve save_note?") {
		t.Errorf("agentctl asked what the policy approved:\n%s", r.stdout)
	}

	agents := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(agents, []byte(`agents:
  - name: careful
    model: demo
    tools: [save_note]
    policy:
      tools:
        save_note: {approval: always}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startAgentd(t, nil, "--config", agents)
	r = ctl{stdin: strings.NewReader("y\n")}.run(t, "--addr", addr, "run", "--auto-approve", "save a note: buy milk")
	wantOutput(t, r, exitOK, "? save_note needs your approval", "approve save_note? [y]es/[n]o/[e]dit: y\n", "✓ save_note approved\n", "Saved your note \"Buy milk\"")
}

// A step that asks several approvals asks them all before the policy answers any: under
// --auto-approve agentctl holds them all, drops each its answer, and asks the person what
// is left when the run goes on to something else.
func TestAutoApproveHoldsAStepsApprovals(t *testing.T) {
	var out logtest.Buffer
	s := newSession(runConfig{autoApprove: true}, env{stdout: &out, stderr: io.Discard, getenv: func(string) string { return "" }}, nil)
	ask := func(id, tool string) *agentdv1.RunEvent {
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ApprovalRequested{ApprovalRequested: &agentdv1.ApprovalRequested{ApprovalId: id, ToolName: tool}}}
	}
	resolve := func(id string) *agentdv1.RunEvent {
		return &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ApprovalResolved{ApprovalResolved: &agentdv1.ApprovalResolved{
			ApprovalId: id, Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, DecidedBy: agentdv1.DecidedBy_DECIDED_BY_POLICY,
		}}}
	}
	for _, ev := range []*agentdv1.RunEvent{ask("appr_1", "fetch"), ask("appr_2", "fetch"), ask("appr_3", "delete"), resolve("appr_2"), resolve("appr_1")} {
		s.settleHeld(ev)
		if ar := ev.GetApprovalRequested(); ar != nil {
			s.onApprovalRequested(ar)
		}
	}
	if strings.Contains(out.String(), "needs your approval") {
		t.Fatalf("asked before the policy had answered:\n%s", out.String())
	}
	// The run goes on to something else: the policy left appr_3 to the person.
	s.settleHeld(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_Heartbeat{Heartbeat: &agentdv1.Heartbeat{}}})
	if strings.Contains(out.String(), "needs your approval") {
		t.Fatal("a heartbeat released the held approvals")
	}
	s.settleHeld(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_StepFinished{StepFinished: &agentdv1.StepFinished{}}})
	if got := strings.Count(out.String(), "needs your approval"); got != 1 || !strings.Contains(out.String(), "? delete needs your approval") {
		t.Errorf("asked %d approvals, want delete's alone:\n%s", got, out.String())
	}
}

// A typed agent's result, and a run's own schema narrowing it, through agentctl and a real
// agentd serving the example agents file: the demo model answers typed runs too.
func TestRunTypedResult(t *testing.T) {
	t.Parallel()
	addr := startAgentd(t, nil, "--config", filepath.Join("..", "..", "deploy", "agents.example.yaml"))
	r := ctl{}.run(t, "--addr", addr, "run", "--agent", "triage", "--output-schema", `{"type":"object","properties":{"severity":{"enum":["high"]}}}`, "what is 12*7")
	wantOutput(t, r, exitOK, "⚙ calculate", "✓ completed", "  output: {\n", `    "severity": "high",`, `    "summary": "12*7 = 84"`)

	// The agent's guardrail refuses the input, and agentctl says which and why.
	r = ctl{}.run(t, "--addr", addr, "run", "--agent", "triage", "my password is hunter2")
	if r.code == exitOK || !strings.Contains(r.stdout+r.stderr, "GUARDRAIL_TRIPPED") || !strings.Contains(r.stdout+r.stderr, "no_secrets") {
		t.Errorf("a refused input: %s\nwant a failure naming GUARDRAIL_TRIPPED and no_secrets", r)
	}
	// An agent that does not allow a schema of the run's refuses the run.
	r = ctl{}.run(t, "--addr", addr, "run", "--agent", "calculator", "--output-schema", `{"type":"object"}`, "what is 1+1")
	if r.code == exitOK || !strings.Contains(r.stderr, "OUTPUT_SCHEMA_NOT_ALLOWED") {
		t.Errorf("a schema where the agent allows none: %s\nwant OUTPUT_SCHEMA_NOT_ALLOWED", r)
	}
}

// A sub-agent's call names its child run, which attach follows.
func TestRunSubagent(t *testing.T) {
	t.Parallel()
	addr := startAgentd(t, nil, "--config", filepath.Join("..", "..", "deploy", "agents.example.yaml"))
	r := ctl{}.run(t, "--addr", addr, "run", "ask the researcher what is 12*7")
	wantOutput(t, r, exitOK, `⚙ researcher {"task":"what is 12*7"}`, "  ↳ child run run_k", "  → 12*7 = 84", "The researcher says: 12*7 = 84", "✓ completed")
	i := strings.Index(r.stdout, "child run ")
	id := strings.Fields(r.stdout[i+len("child run "):])[0]
	r = ctl{}.run(t, "--addr", addr, "attach", id)
	wantOutput(t, r, exitOK, "agent researcher", `⚙ calculate {"expression":"12*7"}`, "12*7 = 84", "✓ completed")
}

// A sub-agent's approval is asked, and answered, at the prompt of the run that called
// it, marked with the agent that asks.
func TestRunSubagentApproval(t *testing.T) {
	t.Parallel()
	addr := startAgentd(t, nil, "--config", filepath.Join("..", "..", "deploy", "agents.example.yaml"))
	r := ctl{stdin: strings.NewReader("y\n")}.run(t, "--addr", addr, "run", "ask the researcher to save a note: buy milk")
	wantOutput(t, r, exitOK, `⚙ researcher {"task":"save a note: buy milk"}`, "  ↳ researcher · run run_k",
		"? save_note (researcher) needs your approval", "✓ save_note approved", "  ✓ researcher completed",
		"The researcher says: Saved your note", "✓ completed")
}
