package service_test

// Faults of a hosted model's server, through the real gRPC server and the real openai
// adapter, on an OpenAI-compatible fake.

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// stallHold is how long stallingOpenAI keeps a stalled response open: far longer than the
// idle timeout and than a loaded machine's delays, so that only a stall nobody detects
// lets it run out.
const stallHold = time.Minute

// stallingOpenAI streams the start of an answer, then nothing more until the client goes
// away, which it reports on gone, or stallHold has passed, which it reports on heldOut.
type stallingOpenAI struct {
	calls   atomic.Int32
	gone    chan struct{}
	heldOut chan struct{}
}

func (f *stallingOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	w.Header().Set("Content-Type", "text/event-stream")
	// Both deltas in one write: a pause between them, on a loaded machine, must not look
	// like the stall, which comes after them.
	for _, delta := range []string{`{"role":"assistant","content":""}`, `{"content":"Once upon a time"}`} {
		fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"stalling","choices":[{"index":0,"delta":%s,"finish_reason":null}]}`+"\n\n", delta)
	}
	w.(http.Flusher).Flush()
	select {
	case <-r.Context().Done():
		f.gone <- struct{}{}
	case <-time.After(stallHold):
		f.heldOut <- struct{}{}
	}
}

// TestProviderFault_StallMidStream: a model server that goes quiet after the first delta
// fails the run, once the agent's idle_timeout has passed, with a run_finished that names
// the stall; what was streamed stays in the transcript, the stalled connection is closed,
// and nothing is left running.
//
// The idle timeout is 1s: a client read of bytes already sent that waits that long for a
// CPU is not a stall a loaded machine makes.
func TestProviderFault_StallMidStream(t *testing.T) {
	servicetest.CheckNoLeak(t)
	fake := &stallingOpenAI{gone: make(chan struct{}, 4), heldOut: make(chan struct{}, 4)}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "agents.yaml")
	os.WriteFile(path, []byte(`
agents:
  - name: teller
    model: openai:stalling
    base_url: `+srv.URL+`/v1
    settings: {idle_timeout: 1s}
    tools: []
`), 0o644)
	cfg, err := agents.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENAI_API_KEY", "sk-test")
	logger := slog.New(slog.DiscardHandler)
	reg, err := agents.NewRegistry(cfg, agents.RegistryOptions{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	ts := servicetest.NewServer(t, service.Config{Agents: reg, Logger: logger, Config: runs.Config{ContinuationKey: testKey}})

	start := time.Now()
	s := servicetest.Open(t, ts.Client, servicetest.Input("teller", "tell me a story"))
	fin, err := s.Finish()
	took := time.Since(start)

	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_FAILED {
		t.Fatalf("run finished %v, want failed; events:\n%s", fin.GetReason(), servicetest.Render(s.Events()))
	}
	const stall = "model stream stalled: no bytes from the model for 1s"
	if re := fin.GetError(); re.GetReason() != "MODEL_ERROR" || !strings.Contains(re.GetMessage(), stall) {
		t.Errorf("run error %v, want MODEL_ERROR naming the stall (%q)", re, stall)
	}
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), stall) {
		t.Errorf("the stream ended with %v, want UNAVAILABLE naming the stall", err)
	}
	// Not before the idle timeout; and before the fake's hold ran out, which only a stall
	// nobody detected waits for.
	if took < time.Second || took >= stallHold {
		t.Errorf("the run failed after %v, want after the idle timeout of 1s and before the fake gave up (%v)", took, stallHold)
	}

	var text strings.Builder
	for _, ev := range s.Events() {
		text.WriteString(ev.GetTextDelta().GetDelta())
	}
	if text.String() != "Once upon a time" {
		t.Errorf("text deltas %q, want the streamed start", text.String())
	}
	msgs := fin.GetNewMessages()
	if len(msgs) != 2 {
		t.Fatalf("new_messages %v, want the input and the partial answer", msgs)
	}
	if m := msgs[1]; m.GetRole() != agentdv1.Role_ROLE_ASSISTANT || !m.GetPartial() || len(m.GetParts()) != 1 || m.GetParts()[0].GetText() != "Once upon a time" {
		t.Errorf("second new message %v, want the partial assistant message with what was streamed", m)
	}

	if n := fake.calls.Load(); n != 1 {
		t.Errorf("the model server got %d requests, want 1: a stall after a delta is not retried", n)
	}
	select {
	case <-fake.gone:
	case <-fake.heldOut:
		t.Errorf("the stalled HTTP stream was still open %v later", stallHold)
	}
	if n := ts.Service.ActiveRuns(); n != 0 {
		t.Errorf("ActiveRuns() = %d after the run, want 0", n)
	}
}
