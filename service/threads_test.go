package service_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/memory"
)

// threadIdentity names the caller by its x-who metadata.
func threadIdentity(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-who"); len(v) > 0 {
		return v[0]
	}
	return ""
}

func onThread(thread, input string) *agentdv1.RunSpec {
	return &agentdv1.RunSpec{Agent: "chat", ThreadId: thread, Input: input, History: agentdv1.History_HISTORY_THREAD}
}

// A thread of three runs where the client sends only its new input: each run's model
// sees the whole conversation, the thread holds every message in order, and only its
// owner sees it.
func TestThreads_ThreeRunsWithOnlyNewInput(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Say("one"), rt.Say("two"), rt.Say("three")}}
	srv := newTestServer(t, service.Config{Config: runs.Config{Identity: threadIdentity}}, scripted{name: "chat", model: m})
	alice := metadata.AppendToOutgoingContext(t.Context(), "x-who", "alice")
	thread := ""
	for i, in := range []string{"first", "second", "third"} {
		resp, err := srv.Client.ExecuteRun(alice, &agentdv1.ExecuteRunRequest{Start: onThread(thread, in)})
		if err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		if thread == "" {
			thread = resp.GetThreadId()
		} else if resp.GetThreadId() != thread {
			t.Fatalf("run %d is on thread %s, want %s", i+1, resp.GetThreadId(), thread)
		}
	}
	reqs := m.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3", len(reqs))
	}
	var seen []string
	for _, msg := range reqs[2].Messages {
		seen = append(seen, msg.Text())
	}
	if want := []string{"first", "one", "second", "two", "third"}; !slices.Equal(seen, want) {
		t.Errorf("the third run's model saw %q, want %q", seen, want)
	}
	got, err := srv.Client.GetThread(alice, &agentdv1.GetThreadRequest{ThreadId: thread, PageSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetThread().GetMessageCount() != 6 || len(got.GetMessages()) != 4 || got.GetNextPageToken() == "" || got.GetThread().GetActiveRunId() != "" {
		t.Fatalf("GetThread: %v", got)
	}
	rest, err := srv.Client.GetThread(alice, &agentdv1.GetThreadRequest{ThreadId: thread, PageToken: got.GetNextPageToken()})
	if err != nil || len(rest.GetMessages()) != 2 || rest.GetNextPageToken() != "" || protoText(rest.GetMessages()[1]) != "three" {
		t.Fatalf("the second page: %v, %v", rest, err)
	}
	list, err := srv.Client.ListThreads(alice, &agentdv1.ListThreadsRequest{})
	if err != nil || len(list.GetThreads()) != 1 || list.GetThreads()[0].GetThreadId() != thread {
		t.Errorf("ListThreads: %v, %v", list, err)
	}
	bob := metadata.AppendToOutgoingContext(t.Context(), "x-who", "bob")
	if _, err := srv.Client.GetThread(bob, &agentdv1.GetThreadRequest{ThreadId: thread}); status.Code(err) != codes.NotFound {
		t.Errorf("another caller's GetThread: %v, want NOT_FOUND", err)
	}
	if _, err := srv.Client.ExecuteRun(bob, &agentdv1.ExecuteRunRequest{Start: onThread(thread, "mine now")}); status.Code(err) != codes.NotFound {
		t.Errorf("another caller's run on the thread: %v, want NOT_FOUND", err)
	}
	if list, _ := srv.Client.ListThreads(bob, &agentdv1.ListThreadsRequest{}); len(list.GetThreads()) != 0 {
		t.Errorf("another caller lists %v", list.GetThreads())
	}
	if _, err := srv.Client.GetThread(alice, &agentdv1.GetThreadRequest{ThreadId: thread, PageToken: "bogus"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a forged page token: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := srv.Client.DeleteThread(alice, &agentdv1.DeleteThreadRequest{ThreadId: thread}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client.GetThread(alice, &agentdv1.GetThreadRequest{ThreadId: thread}); status.Code(err) != codes.NotFound {
		t.Errorf("GetThread of a deleted thread: %v, want NOT_FOUND", err)
	}
}

// A thread has one active run: a second start is refused with ABORTED naming it, or,
// with on_busy STEER, steers its input into the active run and attaches to it; the
// thread cannot be deleted while the run goes on.
func TestThreads_OneActiveRun(t *testing.T) {
	gate, called := make(chan struct{}), make(chan struct{})
	m := &rt.Model{Steps: []rt.Step{gatedCalled(gate, called, "first answer"), rt.Say("answer to both")}}
	srv := newTestServer(t, service.Config{}, scripted{name: "chat", model: m})
	first := servicetest.Open(t, srv.Client, onThread("", "hello"))
	started := first.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetRunStarted() != nil }).GetRunStarted()
	<-called // the steer below comes during the first model call, not before it
	thread, active := started.GetThreadId(), started.GetRunId()

	_, err := srv.Client.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: onThread(thread, "me too")})
	if code, reason, _ := errorInfo(err); code != codes.Aborted || reason != "THREAD_BUSY" || metaOf(err)["active_run_id"] != active {
		t.Fatalf("a second run on the busy thread: %v, want ABORTED (THREAD_BUSY) naming %s", err, active)
	}
	if _, err := srv.Client.DeleteThread(t.Context(), &agentdv1.DeleteThreadRequest{ThreadId: thread}); status.Code(err) != codes.Aborted {
		t.Errorf("deleting the busy thread: %v, want ABORTED", err)
	}

	steer := onThread(thread, "and also this")
	steer.OnBusy = agentdv1.OnBusy_ON_BUSY_STEER
	second := servicetest.Open(t, srv.Client, steer)
	att := second.Next().GetAttached()
	if att == nil || second.Events()[0].GetRunId() != active {
		t.Fatalf("the steering start's first event: %v, want attached to %s", second.Events(), active)
	}
	if ack := second.Next().GetInputAck(); !ack.GetAccepted() {
		t.Fatalf("the steer's ack: %v", ack)
	}
	close(gate)
	for second.Next() != nil {
	}
	if err := second.Err(); err != nil {
		t.Fatal(err)
	}
	fin, err := first.Finish()
	if err != nil || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Fatalf("the active run ended %v, %v", fin, err)
	}
	var texts []string
	for _, msg := range fin.GetNewMessages() {
		texts = append(texts, protoText(msg))
	}
	if want := []string{"hello", "first answer", "and also this", "answer to both"}; !slices.Equal(texts, want) {
		t.Errorf("the active run's new messages: %q, want %q", texts, want)
	}
	got, err := srv.Client.GetThread(t.Context(), &agentdv1.GetThreadRequest{ThreadId: thread})
	if err != nil || got.GetThread().GetMessageCount() != 4 {
		t.Errorf("the thread after the run: %v, %v", got, err)
	}
}

// protoText is the text of a message's text parts.
func protoText(m *agentdv1.Message) string {
	var b strings.Builder
	for _, p := range m.GetParts() {
		b.WriteString(p.GetText())
	}
	return b.String()
}

// firstTurnRead starts a thread with input on StartRun and reads the stream up to
// run_finished, as a client does; it returns the thread's id.
func firstTurnRead(t *testing.T, c agentdv1.AgentServiceClient, input string) string {
	t.Helper()
	stream, err := c.StartRun(t.Context(), &agentdv1.StartRunRequest{Start: onThread("", input)})
	if err != nil {
		t.Fatal(err)
	}
	thread := ""
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if rs := resp.GetEvent().GetRunStarted(); rs != nil {
			thread = rs.GetThreadId()
		}
		if resp.GetEvent().GetRunFinished() != nil {
			return thread
		}
	}
}

// slowThreadStore takes its time adding a run's messages to a thread, as a busy database
// would: a run's run_finished reaches its client before the run is recorded as ended.
type slowThreadStore struct{ store.Store }

func (s slowThreadStore) AppendMessages(ctx context.Context, threadID string, l store.Lease, msgs [][]byte) error {
	time.Sleep(300 * time.Millisecond)
	return s.Store.AppendMessages(ctx, threadID, l, msgs)
}

// A client that starts a thread's next turn as soon as it reads run_finished finds the
// thread free, and the turn before in its history.
func TestThreads_NextTurnRightAfterRunFinished(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Say("one"), rt.Say("two")}}
	srv := newTestServer(t, service.Config{Config: runs.Config{Store: slowThreadStore{memory.New(memory.Options{})}}}, scripted{name: "chat", model: m})
	thread := firstTurnRead(t, srv.Client, "first")
	resp, err := srv.Client.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: onThread(thread, "second")})
	if err != nil {
		t.Fatalf("the next turn, right after run_finished: %v", err)
	}
	if resp.GetResult().GetFinalText() != "two" {
		t.Fatalf("the next turn: %v", resp)
	}
	var seen []string
	for _, msg := range m.Requests()[1].Messages {
		seen = append(seen, msg.Text())
	}
	if want := []string{"first", "one", "second"}; !slices.Equal(seen, want) {
		t.Errorf("the second turn's model saw %q, want %q", seen, want)
	}
}

// A client that reads a thread as soon as it reads run_finished finds the run's messages
// in it.
func TestThreads_HistoryRightAfterRunFinished(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Say("one")}}
	srv := newTestServer(t, service.Config{Config: runs.Config{Store: slowThreadStore{memory.New(memory.Options{})}}}, scripted{name: "chat", model: m})
	thread := firstTurnRead(t, srv.Client, "first")
	got, err := srv.Client.GetThread(t.Context(), &agentdv1.GetThreadRequest{ThreadId: thread})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetThread().GetMessageCount() != 2 || got.GetThread().GetActiveRunId() != "" {
		t.Errorf("GetThread right after the run: %v, want its 2 messages and no active run", got.GetThread())
	}
}
