package runs

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/runs/journal"
)

// awaitSession is a session with no stream attached (acks are only journaled) whose input is open in
// modeRun, closed in the other modes.
func awaitSession(t *testing.T, mode Mode) *session {
	t.Helper()
	ctx, cancel := context.WithCancelCause(t.Context())
	t.Cleanup(func() { cancel(nil) })
	ss := &session{
		srv:  testServer(t),
		mode: mode, ctx: ctx, cancel: cancel, policy: agentdv1.ApprovalPolicy_APPROVAL_POLICY_ASK,
		durable:     durable{journal: journal.New(nil, false)},
		attachments: attachments{outs: map[*journal.Outbox]struct{}{}},
		tools:       runTools{specs: map[string]runtime.ToolSpec{"calc": {Name: "calc"}}, schemas: map[string]*runtime.Schema{}, agent: &compiledSchemas{m: map[string]*runtime.Schema{}}},
		inputs: inputs{
			inputDoneCh: make(chan struct{}),
			approvals:   map[string]*answerSlot[runtime.Decision]{},
			clientCalls: map[string]*answerSlot[runtime.Output]{},
		},
	}
	if mode != ModeRun {
		ss.closeInput()
	}
	return ss
}

// waitKind is one of the two waits for the client, driven as the run and the receive
// goroutine drive it.
type waitKind struct {
	name string
	// open reports the event that opens the slot; wait is the run's call; answer hands
	// the client's answer in as its message would; preload makes it a resume's answer.
	open    func(ss *session)
	wait    func(ctx context.Context, ss *session) (string, error)
	answer  func(ss *session, v string)
	preload func(ss *session, v string)
	// refusal is why the slot refuses an answer now, "" when it takes one.
	refusal func(ss *session) string
	slot    func(ss *session) (closed string, answered bool)
	// expired is what the slot says once the wait's deadline passed; parked, when the run
	// parks instead of waiting.
	expired, parked string
}

var waitKinds = []waitKind{
	{
		name: "approval",
		open: func(ss *session) {
			ss.observe(&runtime.ApprovalRequested{ApprovalID: "ap_1", CallID: "c1", ToolName: "calc", Arguments: `{}`})
		},
		wait: func(ctx context.Context, ss *session) (string, error) {
			d, err := ss.approve(ctx, runtime.ApprovalRequest{ID: "ap_1", Call: runtime.ToolCall{ID: "c1", Name: "calc"}})
			return d.Reason, err
		},
		answer: func(ss *session, v string) {
			ss.decide(input{seq: 1}, &agentdv1.ApprovalDecision{ApprovalId: "ap_1", Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED, Reason: v})
		},
		preload: func(ss *session, v string) {
			ss.preDecisions = map[string]runtime.Decision{"ap_1": {Outcome: runtime.OutcomeApproved, Reason: v}}
		},
		refusal: func(ss *session) string {
			ss.mu.Lock()
			defer ss.mu.Unlock()
			return ss.approvalRefusalLocked(ss.approvals["ap_1"], "ap_1").GetMessage()
		},
		slot: func(ss *session) (string, bool) {
			ss.mu.Lock()
			defer ss.mu.Unlock()
			s := ss.approvals["ap_1"]
			return s.closed, s.answered
		},
		expired: "it expired",
		parked:  "the run parked; resume it with the continuation and this decision",
	},
	{
		name: "client tool",
		open: func(ss *session) {
			ss.observe(&runtime.ToolExecutionStarted{CallID: "c1", Name: "ask", Executor: runtime.ExecutorClient})
		},
		wait: func(ctx context.Context, ss *session) (string, error) {
			out, err := ss.clientTool(runtime.ToolSpec{Name: "ask", Executor: runtime.ExecutorClient}, nil).Execute(ctx, runtime.ToolCall{ID: "c1", Name: "ask"})
			return out.Text, err
		},
		answer: func(ss *session, v string) {
			ss.mu.Lock()
			defer ss.mu.Unlock()
			ss.toolResultLocked(input{seq: 1}, &agentdv1.ToolResult{ToolCallId: "c1", Output: &agentdv1.ToolResult_Text{Text: v}})
		},
		preload: func(ss *session, v string) {
			ss.preResults = map[string]runtime.Output{"c1": {Text: v}}
		},
		refusal: func(ss *session) string {
			ss.mu.Lock()
			defer ss.mu.Unlock()
			return ss.toolResultRefusalLocked(ss.clientCalls["c1"], "c1").GetMessage()
		},
		slot: func(ss *session) (string, bool) {
			ss.mu.Lock()
			defer ss.mu.Unlock()
			s := ss.clientCalls["c1"]
			return s.closed, s.answered
		},
		expired: "it timed out",
		parked:  "the run parked; resume it with the continuation and this result",
	},
}

// result is what a wait returned.
type result struct {
	v   string
	err error
}

// goWait starts k's wait and returns where its result arrives once every goroutine of
// the bubble is blocked: the wait is waiting.
func goWait(ctx context.Context, ss *session, k waitKind) <-chan result {
	ch := make(chan result, 1)
	go func() {
		v, err := k.wait(ctx, ss)
		ch <- result{v, err}
	}()
	synctest.Wait()
	return ch
}

// wantClosed checks that the slot says why, and that an answer sent now is refused
// saying so.
func wantClosed(t *testing.T, ss *session, k waitKind, why string) {
	t.Helper()
	if closed, answered := k.slot(ss); closed != why || answered {
		t.Errorf("slot closed %q (answered %t), want closed %q", closed, answered, why)
	}
	if refusal := k.refusal(ss); !strings.Contains(refusal, why) {
		t.Errorf("an answer now is refused with %q, want it to say %q", refusal, why)
	}
}

func TestAwait(t *testing.T) {
	for _, k := range waitKinds {
		t.Run(k.name+"/answered while waiting", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ss := awaitSession(t, ModeRun)
				k.open(ss)
				got := goWait(t.Context(), ss, k)
				if refusal := k.refusal(ss); refusal != "" {
					t.Fatalf("the waiting slot refuses an answer: %s", refusal)
				}
				k.answer(ss, "yes")
				if r := <-got; r.v != "yes" || r.err != nil {
					t.Errorf("wait = %q, %v; want the answer", r.v, r.err)
				}
				// Taken once: a second answer is refused.
				if _, answered := k.slot(ss); !answered || k.refusal(ss) == "" {
					t.Error("the answered slot takes another answer")
				}
			})
		})

		// One acked is one applied: an answer acked as the wait ends (here, acked before
		// the step's context is done and the wait starts, so that either case of the
		// wait's select may win) is the wait's result.
		t.Run(k.name+"/acked as the wait ends", func(t *testing.T) {
			for range 50 {
				ss := awaitSession(t, ModeRun)
				k.open(ss)
				k.answer(ss, "yes")
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				if v, err := k.wait(ctx, ss); v != "yes" || err != nil {
					t.Fatalf("wait = %q, %v; want the acked answer", v, err)
				}
			}
		})

		t.Run(k.name+"/half-closed client parks the run", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ss := awaitSession(t, ModeRun)
				k.open(ss)
				got := goWait(t.Context(), ss, k)
				ss.closeInput()
				if r := <-got; !errors.Is(r.err, runtime.ErrInterrupt) {
					t.Errorf("wait = %q, %v; want ErrInterrupt", r.v, r.err)
				}
				wantClosed(t, ss, k, "the run parked; resume it with the continuation")
			})
		})

		// receive cancels the run before it closes the input: the run ends, it does not
		// park. The step's context here is not the run's, so that the run's is what the
		// wait sees.
		t.Run(k.name+"/client gone cancels the run", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ss := awaitSession(t, ModeRun)
				k.open(ss)
				got := goWait(context.Background(), ss, k)
				ss.cancel(errors.New("connection closed"))
				ss.closeInput()
				if r := <-got; !errors.Is(r.err, context.Canceled) {
					t.Errorf("wait = %q, %v; want the run's context.Canceled", r.v, r.err)
				}
				if closed, _ := k.slot(ss); closed != "the run is ending" {
					t.Errorf("slot closed %q, want %q", closed, "the run is ending")
				}
			})
		})

		t.Run(k.name+"/expired wait says why", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ss := awaitSession(t, ModeRun)
				k.open(ss)
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				got := goWait(ctx, ss, k)
				if r := <-got; !errors.Is(r.err, context.DeadlineExceeded) {
					t.Errorf("wait = %q, %v; want context.DeadlineExceeded", r.v, r.err)
				}
				wantClosed(t, ss, k, k.expired)
			})
		})

		t.Run(k.name+"/interrupted step", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ss := awaitSession(t, ModeRun)
				k.open(ss)
				ctx, cancel := context.WithCancel(t.Context())
				got := goWait(ctx, ss, k)
				cancel()
				if r := <-got; !errors.Is(r.err, context.Canceled) {
					t.Errorf("wait = %q, %v; want context.Canceled", r.v, r.err)
				}
				wantClosed(t, ss, k, "the step was interrupted")
			})
		})

		// On an RPC that takes no input, nobody can answer: the run parks at once.
		t.Run(k.name+"/nobody can answer", func(t *testing.T) {
			ss := awaitSession(t, ModeStart)
			k.open(ss)
			if v, err := k.wait(t.Context(), ss); !errors.Is(err, runtime.ErrInterrupt) {
				t.Errorf("wait = %q, %v; want ErrInterrupt", v, err)
			}
			wantClosed(t, ss, k, k.parked)
		})

		t.Run(k.name+"/answered by the resume", func(t *testing.T) {
			for _, mode := range []Mode{ModeRun, ModeExecute} {
				ss := awaitSession(t, mode)
				k.preload(ss, "carried")
				k.open(ss)
				if v, err := k.wait(t.Context(), ss); v != "carried" || err != nil {
					t.Errorf("mode %d: wait = %q, %v; want the resume's answer", mode, v, err)
				}
				if k.refusal(ss) == "" {
					t.Errorf("mode %d: the call takes the client's answer after the resume's", mode)
				}
			}
		})
	}
}

// TestApprovePolicy: the run's approval policy answers in the client's place, except
// what a resume carried, and says so in the approval's slot.
func TestApprovePolicy(t *testing.T) {
	const (
		deny      = agentdv1.ApprovalPolicy_APPROVAL_POLICY_AUTO_DENY
		approve   = agentdv1.ApprovalPolicy_APPROVAL_POLICY_AUTO_APPROVE
		interrupt = agentdv1.ApprovalPolicy_APPROVAL_POLICY_INTERRUPT
	)
	tests := []struct {
		name     string
		policy   agentdv1.ApprovalPolicy
		auto     bool // the call is AutoApprovable
		want     runtime.Decision
		wantErr  error
		why      string
		preload  bool
		wantsAsk bool // the client is asked
	}{
		{name: "auto deny", policy: deny, want: runtime.Decision{Outcome: runtime.OutcomeDenied, DecidedBy: runtime.DecidedByPolicy, Reason: "the run's approval policy denies calls that need an approval"},
			why: "the run's approval policy denied it"},
		{name: "auto approve", policy: approve, auto: true, want: runtime.Decision{Outcome: runtime.OutcomeApproved, DecidedBy: runtime.DecidedByPolicy},
			why: "the run's approval policy approved it"},
		{name: "auto approve, a call that always asks", policy: approve, wantsAsk: true},
		{name: "interrupt", policy: interrupt, wantErr: runtime.ErrInterrupt, why: "the run parked; resume it with the continuation and this decision"},
		{name: "resume's decision first", policy: deny, preload: true, want: runtime.Decision{Outcome: runtime.OutcomeApproved, Reason: "carried"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ss := awaitSession(t, ModeRun)
				ss.policy = tt.policy
				k := waitKinds[0]
				if tt.preload {
					k.preload(ss, "carried")
				}
				k.open(ss)
				got := make(chan result, 1)
				go func() {
					d, err := ss.approve(t.Context(), runtime.ApprovalRequest{ID: "ap_1", AutoApprovable: tt.auto})
					if d != tt.want && !tt.wantsAsk {
						t.Errorf("approve = %+v, want %+v", d, tt.want)
					}
					got <- result{d.Reason, err}
				}()
				synctest.Wait()
				if tt.wantsAsk {
					k.answer(ss, "client")
				}
				r := <-got
				if !errors.Is(r.err, tt.wantErr) || (tt.wantsAsk && r.v != "client") {
					t.Errorf("approve = %q, %v; want %v", r.v, r.err, tt.wantErr)
				}
				if tt.why != "" {
					wantClosed(t, ss, k, tt.why)
				}
			})
		})
	}
}

// TestApprovePolicy_AnAckedDecisionWins: a step announces all its approvals before the
// run asks for any, so a client may decide one, and be told its decision was accepted,
// before approve runs; under a policy that answers for it (deny, or park), the
// client's decision is the one applied.
func TestApprovePolicy_AnAckedDecisionWins(t *testing.T) {
	for _, policy := range []agentdv1.ApprovalPolicy{agentdv1.ApprovalPolicy_APPROVAL_POLICY_AUTO_DENY, agentdv1.ApprovalPolicy_APPROVAL_POLICY_INTERRUPT} {
		t.Run(policy.String(), func(t *testing.T) {
			ss := awaitSession(t, ModeRun)
			ss.policy = policy
			k := waitKinds[0]
			k.open(ss)
			k.answer(ss, "client approved")
			if _, answered := k.slot(ss); !answered {
				t.Fatal("the decision was not accepted")
			}
			got, err := k.wait(t.Context(), ss)
			if err != nil || got != "client approved" {
				t.Errorf("approve = %q, %v; want the client's decision", got, err)
			}
		})
	}
}

// testServer is an engine for a session built by hand, with a memory store.
func testServer(t *testing.T) *Manager {
	t.Helper()
	s, err := New(Config{}, emptyAgents{}, slog.New(slog.DiscardHandler), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background(), 0) })
	return s
}

type emptyAgents struct{}

func (emptyAgents) Agent(string) (*Agent, error) { return nil, ErrAgentNotFound }
func (emptyAgents) List() []*Agent               { return nil }
