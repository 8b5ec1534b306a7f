package service_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// fuzzInput reads a fuzz input a byte at a time; past its end it reads zeros.
type fuzzInput struct{ b []byte }

func (in *fuzzInput) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

func (in *fuzzInput) empty() bool { return len(in.b) == 0 }

// str takes a short string from the input: its length, then its bytes, made valid
// UTF-8 (a client cannot encode anything else; the tests of codec_test.go send it raw).
func (in *fuzzInput) str() string {
	n := min(int(in.byte()%16), len(in.b))
	s := strings.ToValidUTF8(string(in.b[:n]), "?")
	in.b = in.b[n:]
	return s
}

// deepValue is a google.protobuf.Value of lists nested depth deep.
func deepValue(depth int) *structpb.Value {
	v := structpb.NewStringValue("x")
	for range depth {
		v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
	}
	return v
}

// fuzzStart is the first message of a fuzzed stream.
func fuzzStart(in *fuzzInput) *agentdv1.RunRequest {
	text := []string{"save a note: milk", "what is 12*7", "hello", "what time is it in Europe/Paris", in.str()}
	spec := &agentdv1.RunSpec{}
	switch v := in.byte(); v % 8 {
	case 0, 1, 2, 3:
		spec.Input = text[int(in.byte())%len(text)]
	case 4:
		spec.Messages = []*agentdv1.Message{
			{Role: agentdv1.Role_ROLE_SYSTEM, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: in.str()}}}},
			{Role: agentdv1.Role(in.byte() % 6), Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: text[int(in.byte())%len(text)]}}}},
		}
	case 5:
		spec.Input = "save a note: milk"
		spec.ClientTools = []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: in.str(), Parameters: &structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("object")}}}, RequiresApproval: in.byte()%2 == 0}}
	case 6:
		spec.Input = "save a note: milk"
		spec.Continuation = []byte(in.str())
	case 7:
		// Not a start at all: the stream must be refused.
		return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Ping{Ping: &agentdv1.Ping{}}}
	}
	spec.Config = &agentdv1.RunConfig{ApprovalPolicy: agentdv1.ApprovalPolicy(in.byte() % 6)}
	if in.byte()%4 == 0 {
		spec.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"k": deepValue(int(in.byte() % 80))}}
	}
	return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: spec}}
}

// fuzzRun is a Run stream driven by a fuzz input: the events are read on a goroutine of
// their own while the messages go out.
type fuzzRun struct {
	mu       sync.Mutex
	events   []*agentdv1.RunEvent
	err      error
	changed  chan struct{} // closed and replaced on each event
	finished chan struct{} // closed when the stream has ended
	waitLeft time.Duration // what await may still wait, over the whole stream
}

func (r *fuzzRun) read(s agentdv1.AgentService_RunClient) {
	defer close(r.finished)
	for {
		resp, err := s.Recv()
		r.mu.Lock()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.err = err
			}
			close(r.changed)
			r.mu.Unlock()
			return
		}
		r.events = append(r.events, resp.GetEvent())
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
	}
}

// await waits, for a second at most and for waitLeft in all, for an event that match
// picks a string from, and returns it; "" when the stream ended first or nothing came.
// The bound over the stream keeps an input of many awaits for events that never come
// within the stream's deadline.
func (r *fuzzRun) await(match func(*agentdv1.RunEvent) string) string {
	wait := min(time.Second, r.waitLeft)
	start := time.Now()
	defer func() { r.waitLeft -= min(time.Since(start), r.waitLeft) }()
	deadline := time.After(wait)
	for {
		r.mu.Lock()
		for _, ev := range r.events {
			if s := match(ev); s != "" {
				r.mu.Unlock()
				return s
			}
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-r.finished:
			return ""
		case <-deadline:
			return ""
		}
	}
}

// fuzzMessage builds the next client message, or nil to half-close the stream.
func fuzzMessage(in *fuzzInput, r *fuzzRun) *agentdv1.RunRequest {
	approvalID := func() string {
		return r.await(func(ev *agentdv1.RunEvent) string { return ev.GetApprovalRequested().GetApprovalId() })
	}
	decision := func(id string, outcome agentdv1.ApprovalOutcome, edited *structpb.Value) *agentdv1.RunRequest {
		return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{ApprovalId: id, Outcome: outcome, EditedArguments: edited}}}
	}
	steer := func(st *agentdv1.Steer) *agentdv1.RunRequest {
		if in.byte()%2 == 0 {
			st.Mode = agentdv1.SteerMode_STEER_MODE_INTERRUPT
		}
		return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Steer{Steer: st}}
	}
	switch op := in.byte() % 16; op {
	case 0:
		return decision(approvalID(), agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, nil)
	case 1:
		return decision(approvalID(), agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_DENIED, nil)
	case 2:
		return decision(in.str(), agentdv1.ApprovalOutcome(in.byte()%4), nil)
	case 3:
		edited := []*structpb.Value{
			structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"title": structpb.NewStringValue(in.str()), "text": structpb.NewStringValue("eggs")}}),
			structpb.NewStructValue(&structpb.Struct{}),
			structpb.NewNumberValue(7),
			deepValue(int(in.byte() % 120)),
		}[in.byte()%4]
		return decision(approvalID(), agentdv1.ApprovalOutcome(in.byte()%4), edited)
	case 4:
		return steer(&agentdv1.Steer{Text: in.str()})
	case 5:
		return steer(&agentdv1.Steer{Message: &agentdv1.Message{Role: agentdv1.Role(in.byte() % 6), Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: in.str()}}}}})
	case 6:
		return steer(&agentdv1.Steer{Text: "x", Message: &agentdv1.Message{}})
	case 7:
		return steer(&agentdv1.Steer{})
	case 8:
		tr := &agentdv1.ToolResult{ToolCallId: in.str(), IsError: in.byte()%2 == 0}
		if in.byte()%2 == 0 {
			tr.Output = &agentdv1.ToolResult_Json{Json: deepValue(int(in.byte() % 120))}
		} else {
			tr.Output = &agentdv1.ToolResult_Text{Text: in.str()}
		}
		return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ToolResult{ToolResult: tr}}
	case 9:
		id := r.await(func(ev *agentdv1.RunEvent) string { return ev.GetToolExecutionStarted().GetToolCallId() })
		return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_ToolResult{ToolResult: &agentdv1.ToolResult{ToolCallId: id, Output: &agentdv1.ToolResult_Text{Text: "done"}}}}
	case 10:
		return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Cancel{Cancel: &agentdv1.Cancel{Reason: in.str()}}}
	case 11, 12:
		return &agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Ping{Ping: &agentdv1.Ping{}}}
	case 13:
		return &agentdv1.RunRequest{}
	case 14:
		return fuzzStart(in)
	default:
		return nil
	}
}

// FuzzSession feeds a Run stream a random sequence of valid and invalid client messages.
// Whatever comes, the server must not panic (a panic in a handler ends the test binary)
// and the stream must end within 5 s; it is either refused before its first event with
// a status carrying google.rpc.ErrorInfo, or it runs: run_started first, run_finished
// last, seq without gaps, and every input_ack names a client_seq that was sent after
// start, once, in the order the messages were sent.
func FuzzSession(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0})                    // save a note, approve it
	f.Add([]byte{0, 0, 0, 0, 1})                    // save a note, deny it
	f.Add([]byte{1, 1, 0, 0, 11, 13, 12})           // calculate; pings and an empty message
	f.Add([]byte{2, 2, 0, 0, 10, 3, 'b', 'y', 'e'}) // cancel with a reason
	f.Add([]byte{0, 0, 0, 0, 4, 2, 'h', 'i', 1, 0}) // interrupting steer, then approve
	f.Add([]byte{0, 0, 0, 0, 3, 0, 60, 0, 0})       // approve with deeply nested edited arguments
	f.Add([]byte{0, 0, 0, 0, 8, 2, 'c', '1', 0, 0, 100})
	f.Add([]byte{0, 0, 0, 0, 14, 0, 0, 0, 0, 0, 0})    // a second start
	f.Add([]byte{4, 3, 'b', 'e', ' ', 1, 2, 0, 0, 0})  // system and user messages
	f.Add([]byte{5, 4, 'a', 's', 'k', 0, 0, 0, 0, 9})  // a client tool, a result for no call
	f.Add([]byte{6, 2, 0xff, 0xfe, 0, 0})              // a forged continuation
	f.Add([]byte{7})                                   // the first message is no start
	f.Add([]byte{0, 4, 2, 0xc3, 0x28, 0, 0, 0, 15})    // invalid UTF-8 in the input
	f.Add([]byte{3, 3, 1, 0, 5, 1, 2, 'o', 'k', 6, 7}) // steers of every shape
	f.Add([]byte{0, 0, 0, 3, 79, 0})                   // deep metadata
	f.Add([]byte{0, 0, 2, 0, 0})                       // auto-approve
	c := newTestServer(f, service.Config{Config: runs.Config{SteerRate: 1000, SteerBurst: 1000}}).Client
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzInput{b: data}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := c.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := &fuzzRun{changed: make(chan struct{}), finished: make(chan struct{}), waitLeft: 2 * time.Second}
		go r.read(s)
		sent := map[int64]bool{}
		var seq int64
		for i := 0; i < 20; i++ {
			var req *agentdv1.RunRequest
			if i == 0 {
				req = fuzzStart(in)
			} else if in.empty() {
				break
			} else if req = fuzzMessage(in, r); req == nil {
				break
			}
			seq++
			req.ClientSeq = seq
			if err := s.Send(req); err != nil {
				if errors.Is(err, io.EOF) {
					break // the server ended the stream
				}
				t.Fatalf("Send: %v", err)
			}
			if i > 0 {
				sent[seq] = true
			}
		}
		s.CloseSend()
		<-r.finished
		if ctx.Err() != nil {
			t.Fatalf("the stream did not end within 5 s (%v); events:\n%s", r.err, servicetest.Render(r.events))
		}
		if len(r.events) == 0 {
			st := status.Convert(r.err)
			var info *errdetails.ErrorInfo
			for _, d := range st.Details() {
				if d, ok := d.(*errdetails.ErrorInfo); ok {
					info = d
				}
			}
			if r.err == nil || info.GetReason() == "" || info.GetDomain() != "agentd" {
				t.Fatalf("refused with %v, want a status with an agentd ErrorInfo", r.err)
			}
			return
		}
		servicetest.CheckEvents(t, r.events)
		if r.err != nil {
			if _, reason, _ := errorInfo(r.err); reason == "" {
				t.Errorf("ended with %v after run_finished, without an ErrorInfo", r.err)
			}
		}
		var last int64
		for _, ev := range r.events {
			a := ev.GetInputAck()
			if a == nil {
				continue
			}
			cs := a.GetClientSeq()
			switch {
			case !sent[cs]:
				t.Fatalf("ack of client_seq %d, which was not sent after start; events:\n%s", cs, servicetest.Render(r.events))
			case cs <= last:
				t.Fatalf("ack of client_seq %d after the ack of %d; events:\n%s", cs, last, servicetest.Render(r.events))
			case !a.GetAccepted() && (a.GetError().GetReason() == "" || strings.TrimSpace(a.GetError().GetMessage()) == ""):
				t.Fatalf("refusal of client_seq %d without a reason and a message: %v", cs, a)
			}
			last = cs
		}
	})
}
