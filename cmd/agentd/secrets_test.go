//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// The marker secrets of TestSecretsNeverReachLogsOrEvents: each is planted in one place a
// secret can reach agentd, and none may show in its logs, events or statuses, raw or
// encoded.
const (
	// markerKey is the continuation key (AGENTD_CONTINUATION_KEY, raw: 41 bytes).
	markerKey = "SECRETMARKER1-contkey-9d41f07a2c6e58b3e1aa"
	// markerToken is the one bearer token of --auth-tokens-file.
	markerToken = "SECRETMARKER2-token-4be8a1c07d93f265"
	// markerOpenAI is OPENAI_API_KEY.
	markerOpenAI = "SECRETMARKER3-sk-openai-0c7e52a9b1d4f836"
	// markerAnthropic is ANTHROPIC_API_KEY.
	markerAnthropic = "SECRETMARKER4-sk-ant-e5a2093fb7c14d68"
	// markerWrongToken is a wrong bearer token a client tries.
	markerWrongToken = "SECRETMARKER5-wrongtoken-71d3c8e02fa9b546"
)

// secretRecord collects everything agentd said to its clients: events and responses as
// protojson text, and the messages and details of error statuses.
type secretRecord struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *secretRecord) add(what string, m proto.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.buf, "%s: %s\n", what, protojson.Format(m))
}

func (r *secretRecord) addErr(what string, err error) {
	if err == nil {
		return
	}
	st := status.Convert(err)
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.buf, "%s: status %s: %s\n", what, st.Code(), st.Message())
	fmt.Fprintf(&r.buf, "%s: status proto: %s\n", what, protojson.Format(st.Proto()))
	for _, d := range st.Details() {
		fmt.Fprintf(&r.buf, "%s: detail %v\n", what, d)
	}
}

func (r *secretRecord) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// secretForms returns the marker as it could appear in text: raw, hex (both cases) and
// standard and URL-safe base64 at each of the three byte alignments (the characters that
// depend on the marker's bytes alone).
func secretForms(marker string) map[string]string {
	forms := map[string]string{
		"raw":       marker,
		"hex":       hex.EncodeToString([]byte(marker)),
		"HEX":       strings.ToUpper(hex.EncodeToString([]byte(marker))),
		"json-utf8": strings.TrimSuffix(strings.TrimPrefix(mustJSON(marker), `"`), `"`),
	}
	for k := range 3 {
		b := append(make([]byte, k), marker...)
		enc := base64.StdEncoding.EncodeToString(b)
		start, end := (8*k+5)/6, 8*len(b)/6
		forms["base64+"+strconv.Itoa(k)] = enc[start:end]
		forms["base64url+"+strconv.Itoa(k)] = base64.URLEncoding.EncodeToString(b)[start:end]
	}
	return forms
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestSecretsNeverReachLogsOrEvents builds the real agentd and starts it with marker
// secrets everywhere a secret can be (the continuation key, the bearer token file, the
// OpenAI and Anthropic keys), at debug level with audit records, and with agents on
// OpenAI and Anthropic models served by a fake that fails every call (so the keys are
// sent and the failures logged) and falls back to the demo model. It drives runs with the
// right token and a wrong one (itself a marker), parks and resumes a run with an approval,
// decides one on a bidi stream, forges continuations and lists the agents; then checks
// that no marker, raw, hex or base64, is in agentd's output, in any event or response,
// or in any status. Finally SIGTERM must end agentd with exit status 0.
func TestSecretsNeverReachLogsOrEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: builds and starts agentd; skipped with -short")
	}

	// The provider: fails every call with 500, noting the keys it was sent.
	var keysMu sync.Mutex
	gotKeys := map[string]int{}
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		keysMu.Lock()
		gotKeys["authorization="+r.Header.Get("Authorization")]++
		gotKeys["x-api-key="+r.Header.Get("X-Api-Key")]++
		keysMu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"message":"upstream exploded","type":"server_error"}}`))
	}))
	defer fake.Close()

	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("# the one token\n"+markerToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agentsFile := filepath.Join(dir, "agents.yaml")
	if err := os.WriteFile(agentsFile, []byte(`agents:
  - name: demo
    model: demo
  - name: gpt
    model: openai:fake
    base_url: `+fake.URL+`/v1
    fallback_models: [demo]
  - name: claude
    model: anthropic:fake
    base_url: `+fake.URL+`
    fallback_models: [demo]
`), 0o600); err != nil {
		t.Fatal(err)
	}

	agentd := startAgentd(t, []string{"--config", agentsFile, "--auth-tokens-file", tokens, "--log-level", "debug", "--audit", "--demo-delay", "0"},
		"AGENTD_CONTINUATION_KEY="+markerKey,
		"OPENAI_API_KEY="+markerOpenAI,
		"ANTHROPIC_API_KEY="+markerAnthropic,
	)
	agentdLog := agentd.Log

	conn := agentd.Dial(t)
	client := agentdv1.NewAgentServiceClient(conn)
	rec := &secretRecord{}
	ctx, cancel := context.WithTimeout(t.Context(), e2eScriptTimeout)
	defer cancel()
	authed := withToken(ctx, markerToken)
	wrong := withToken(ctx, markerWrongToken)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\n--- agentd log:\n%s", append(args, agentdLog())...)
	}

	// streamEvents records every event of a StartRun and returns them.
	streamEvents := func(what string, ctx context.Context, spec *agentdv1.RunSpec) []*agentdv1.RunEvent {
		t.Helper()
		stream, err := client.StartRun(ctx, &agentdv1.StartRunRequest{Start: spec})
		var events []*agentdv1.RunEvent
		for err == nil {
			var resp *agentdv1.StartRunResponse
			if resp, err = stream.Recv(); err == nil {
				rec.add(what, resp)
				events = append(events, resp.GetEvent())
			}
		}
		if !errors.Is(err, io.EOF) {
			fail("%s: StartRun: %v", what, err)
		}
		return events
	}
	execute := func(what string, spec *agentdv1.RunSpec) *agentdv1.ExecuteRunResponse {
		t.Helper()
		resp, err := client.ExecuteRun(authed, &agentdv1.ExecuteRunRequest{Start: spec})
		rec.addErr(what, err)
		if err != nil {
			fail("%s: ExecuteRun: %v", what, err)
		}
		rec.add(what, resp)
		return resp
	}

	// ListAgents, with the right token.
	agents, err := client.ListAgents(authed, &agentdv1.ListAgentsRequest{})
	if err != nil {
		fail("ListAgents: %v", err)
	}
	rec.add("ListAgents", agents)
	if n := len(agents.GetAgents()); n != 3 {
		t.Errorf("ListAgents: %d agents, want 3 (demo, gpt, claude)", n)
	}

	// Runs with the right token.
	if got := execute("ExecuteRun demo", &agentdv1.RunSpec{Agent: "demo", Input: "what is 2+2?"}).GetResult().GetFinalText(); got != "2+2 = 4" {
		t.Errorf("ExecuteRun demo: final text %q, want 2+2 = 4", got)
	}
	streamEvents("StartRun demo", authed, &agentdv1.RunSpec{Agent: "demo", Input: "what is 12*7?"})

	// A wrong token, itself a marker: refused everywhere, never echoed.
	_, err = client.ListAgents(wrong, &agentdv1.ListAgentsRequest{})
	rec.addErr("ListAgents wrong token", err)
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("ListAgents with a wrong token: %v, want UNAUTHENTICATED", err)
	}
	_, err = client.ExecuteRun(wrong, &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{Agent: "demo", Input: "what is 2+2?"}})
	rec.addErr("ExecuteRun wrong token", err)
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("ExecuteRun with a wrong token: %v, want UNAUTHENTICATED", err)
	}
	if stream, err := client.StartRun(wrong, &agentdv1.StartRunRequest{Start: &agentdv1.RunSpec{Agent: "demo", Input: "what is 2+2?"}}); err == nil {
		var resp *agentdv1.StartRunResponse
		if resp, err = stream.Recv(); err == nil {
			rec.add("StartRun wrong token", resp)
		}
		rec.addErr("StartRun wrong token", err)
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("StartRun with a wrong token: %v, want UNAUTHENTICATED", err)
		}
	}
	if stream, err := client.Run(wrong); err == nil {
		_ = stream.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: &agentdv1.RunSpec{Agent: "demo", Input: "hi"}}})
		var resp *agentdv1.RunResponse
		if resp, err = stream.Recv(); err == nil {
			rec.add("Run wrong token", resp)
		}
		rec.addErr("Run wrong token", err)
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("Run with a wrong token: %v, want UNAUTHENTICATED", err)
		}
	}

	// ExecuteRun parks on save_note's approval; ExecuteRun resumes it approved.
	parked := execute("ExecuteRun park", &agentdv1.RunSpec{Agent: "demo", Input: "save a note: buy milk"})
	res := parked.GetResult()
	if res.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT || len(res.GetPendingApprovals()) != 1 || len(res.GetContinuation()) == 0 {
		fail("ExecuteRun park: %v, want AWAITING_INPUT with one approval and a continuation", protojson.Format(parked))
	}
	resumed := execute("ExecuteRun resume", &agentdv1.RunSpec{
		Messages:     res.GetNewMessages(),
		Continuation: res.GetContinuation(),
		Decisions: []*agentdv1.ApprovalDecision{{
			ApprovalId: res.GetPendingApprovals()[0].GetApprovalId(),
			Outcome:    agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
		}},
	})
	if r := resumed.GetResult(); r.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || !strings.Contains(r.GetFinalText(), "Saved") {
		t.Errorf("ExecuteRun resume: %s, want COMPLETED having saved the note", protojson.Format(resumed))
	}
	if resumed.GetThreadId() != parked.GetThreadId() {
		t.Errorf("resumed on thread %q, parked on %q", resumed.GetThreadId(), parked.GetThreadId())
	}

	// Forged continuations: a flipped byte, a truncation, junk. FAILED_PRECONDITION each.
	flipped := bytes.Clone(res.GetContinuation())
	flipped[len(flipped)/2] ^= 0x01
	for name, c := range map[string][]byte{
		"flipped":   flipped,
		"truncated": res.GetContinuation()[:len(res.GetContinuation())/2],
		"junk":      []byte("\x01not a continuation at all"),
	} {
		_, err := client.ExecuteRun(authed, &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{
			Messages:     res.GetNewMessages(),
			Continuation: c,
			Decisions: []*agentdv1.ApprovalDecision{{
				ApprovalId: res.GetPendingApprovals()[0].GetApprovalId(),
				Outcome:    agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
			}},
		}})
		rec.addErr("forged continuation "+name, err)
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("forged continuation (%s): %v, want FAILED_PRECONDITION", name, err)
		}
	}

	// A bidi Run asks for the approval and the client approves it on the stream.
	func() {
		stream, err := client.Run(authed)
		if err != nil {
			fail("Run: %v", err)
		}
		err = stream.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: &agentdv1.RunSpec{
			Agent:  "demo",
			Input:  "save a note: call mum",
			Config: &agentdv1.RunConfig{ApprovalPolicy: agentdv1.ApprovalPolicy_APPROVAL_POLICY_ASK},
		}}})
		if err != nil {
			fail("Run: send start: %v", err)
		}
		var reason agentdv1.RunEndReason
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			rec.addErr("Run approve", err)
			if err != nil {
				fail("Run: %v", err)
			}
			rec.add("Run approve", resp)
			ev := resp.GetEvent()
			if ar := ev.GetApprovalRequested(); ar != nil {
				err := stream.Send(&agentdv1.RunRequest{ClientSeq: 2, Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
					ApprovalId: ar.GetApprovalId(),
					Outcome:    agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
				}}})
				if err != nil {
					fail("Run: send decision: %v", err)
				}
			}
			if rf := ev.GetRunFinished(); rf != nil {
				reason = rf.GetReason()
				_ = stream.CloseSend()
			}
		}
		if reason != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
			t.Errorf("Run with an approval on the stream ended %v, want COMPLETED", reason)
		}
	}()

	// A Run stream goes away while its run waits on an approval: the run goes on without
	// it, which agentd logs at debug level (so that the capture holds debug records
	// whatever else a run's timing leaves out of them).
	func() {
		gone, cancel := context.WithCancel(authed)
		defer cancel()
		stream, err := client.Run(gone)
		if err != nil {
			fail("Run: %v", err)
		}
		if err := stream.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: &agentdv1.RunSpec{
			Agent: "demo", Input: "save a note: water the plants",
		}}}); err != nil {
			fail("Run: send start: %v", err)
		}
		for {
			resp, err := stream.Recv()
			rec.addErr("Run gone", err)
			if err != nil {
				fail("Run gone: %v", err)
			}
			rec.add("Run gone", resp)
			if resp.GetEvent().GetApprovalRequested() != nil {
				break
			}
		}
		cancel()
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(agentdLog(), `"level":"DEBUG"`) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	}()

	// The provider agents: every call fails with 500, retried, then the demo model answers.
	for _, agent := range []string{"gpt", "claude"} {
		if got := execute("ExecuteRun "+agent, &agentdv1.RunSpec{Agent: agent, Input: "what is 6*7?"}).GetResult().GetFinalText(); got != "6*7 = 42" {
			t.Errorf("ExecuteRun %s: final text %q, want the fallback demo model's 6*7 = 42", agent, got)
		}
		streamEvents("StartRun "+agent, authed, &agentdv1.RunSpec{Agent: agent, Input: "what is 3+4?"})
	}
	keysMu.Lock()
	if gotKeys["authorization=Bearer "+markerOpenAI] == 0 || gotKeys["authorization=Bearer "+markerAnthropic]+gotKeys["x-api-key="+markerAnthropic] == 0 {
		t.Errorf("the fake provider never got the keys (calls by header: %v): the provider agents did not call it", gotKeys)
	}
	keysMu.Unlock()

	// SIGTERM: exit 0.
	if err := agentd.Terminate(e2eStopWithin); err != nil {
		t.Errorf("SIGTERM: %v, want exit status 0\n--- agentd log:\n%s", err, agentdLog())
	}

	logText, said := agentdLog(), rec.String()
	// The capture must hold what is checked: debug records, audit records of tool calls
	// and decisions, the refused token and continuations.
	for _, want := range []string{`"level":"DEBUG"`, `"msg":"tool call"`, `"msg":"tool call decision"`, `"grpc.code":"Unauthenticated"`, `"grpc.code":"FailedPrecondition"`} {
		if !strings.Contains(logText, want) {
			t.Errorf("agentd's log has no %q: the capture is not what the test thinks it is", want)
		}
	}
	if !strings.Contains(said, "status Unauthenticated") || !strings.Contains(said, "status FailedPrecondition") {
		t.Errorf("the record lacks the refusals it should hold")
	}
	t.Logf("checked %d bytes of agentd output (%d lines) and %d bytes of events, responses and statuses",
		len(logText), strings.Count(logText, "\n"), len(said))

	for _, m := range []struct{ name, marker string }{
		{"continuation key", markerKey},
		{"bearer token", markerToken},
		{"OPENAI_API_KEY", markerOpenAI},
		{"ANTHROPIC_API_KEY", markerAnthropic},
		{"wrong bearer token", markerWrongToken},
	} {
		for form, s := range secretForms(m.marker) {
			for where, text := range map[string]string{"agentd's log": logText, "what clients received": said} {
				if i := strings.Index(text, s); i >= 0 {
					t.Errorf("the %s (%s form) is in %s: …%s…", m.name, form, where, text[max(0, i-200):min(len(text), i+len(s)+200)])
				}
			}
		}
	}
	// Every marker shares this prefix: any of them, even cut short, would show it.
	if strings.Contains(logText, "SECRETMARKER") || strings.Contains(said, "SECRETMARKER") {
		t.Errorf("a marker prefix is in agentd's log or what clients received")
	}
}

// TestSecretsFormsDetectEncodings checks the detector itself: a marker hex- or
// base64-encoded at any offset inside other bytes is found by one of its forms.
func TestSecretsFormsDetectEncodings(t *testing.T) {
	forms := secretForms(markerKey)
	for pad := range 4 {
		b := append([]byte(strings.Repeat("x", pad)), markerKey+"tail"...)
		for name, text := range map[string]string{
			"base64":    base64.StdEncoding.EncodeToString(b),
			"base64url": base64.RawURLEncoding.EncodeToString(b),
			"hex":       hex.EncodeToString(b),
			"HEX":       strings.ToUpper(hex.EncodeToString(b)),
		} {
			found := false
			for _, f := range forms {
				found = found || strings.Contains(text, f)
			}
			if !found {
				t.Errorf("%s of the marker after %d bytes is not detected: %s", name, pad, text)
			}
		}
	}
}
