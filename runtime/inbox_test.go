package runtime_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// Past either bound Send refuses the steer with the limit it would pass, and the refused
// steer takes no room: once the run takes the queued ones, there is room again.
func TestInbox_BoundsRefuseWithTheLimit(t *testing.T) {
	steer := func(text string) runtime.Steer { return runtime.Steer{Message: runtime.UserMessage(text)} }
	tests := []struct {
		name                string
		maxSteers, maxBytes int
		sends               []string
		want                runtime.InboxFullError
	}{
		{"steers", 2, 0, []string{"a", "b", "c"}, runtime.InboxFullError{Limit: runtime.LimitSteers, Max: 2, Want: 3}},
		{"bytes", 0, 10, []string{"12345", "123456"}, runtime.InboxFullError{Limit: runtime.LimitBytes, Max: 10, Want: 11}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &runtime.Inbox{MaxSteers: tt.maxSteers, MaxBytes: tt.maxBytes}
			var err error
			for i, s := range tt.sends {
				err = in.Send(steer(s))
				if i < len(tt.sends)-1 && err != nil {
					t.Fatalf("Send(%q) = %v, want it queued", s, err)
				}
			}
			full, ok := errors.AsType[*runtime.InboxFullError](err)
			if !ok || *full != tt.want || !errors.Is(err, runtime.ErrInboxFull) {
				t.Fatalf("last Send = %v, want %+v matching ErrInboxFull", err, tt.want)
			}
			// A run takes the queued steers at its first step: then the refused one fits.
			m := &rt.Model{Steps: []rt.Step{rt.Say("ok"), rt.Say("ok again")}}
			var once sync.Once
			_, fin := run(t, newAgent(t, m, runtime.Config{}), t.Context(), &runtime.Request{Inbox: in, Hooks: onEvent(func(ev runtime.Event) {
				if _, ok := ev.(*runtime.StepStarted); ok {
					once.Do(func() {
						if err := in.Send(steer(tt.sends[len(tt.sends)-1])); err != nil {
							t.Errorf("Send after the run took the queue = %v, want it queued", err)
						}
					})
				}
			})})
			if fin.Reason != runtime.EndCompleted || m.Calls() != 2 {
				t.Errorf("finished %v after %d model calls, want completed after 2", fin.Reason, m.Calls())
			}
		})
	}
}

// A steer sent while the run goes on, however close to its end, is applied, or Send
// refuses it: none is accepted and then lost. Once Send refused one, it refuses all.
func TestInbox_AcceptedSteersAreNeverLost(t *testing.T) {
	const n = 200
	steps := make([]rt.Step, n+1)
	for i := range steps {
		steps[i] = rt.Say("ok")
	}
	m := &rt.Model{Steps: steps}
	a := newAgent(t, m, runtime.Config{})
	var inbox runtime.Inbox
	accepted := map[int64]bool{}
	var wg sync.WaitGroup
	wg.Go(func() {
		closed := false
		for seq := int64(1); seq <= n; seq++ {
			err := inbox.Send(runtime.Steer{Seq: seq, Message: runtime.UserMessage("more")})
			switch {
			case err == nil && closed:
				t.Errorf("steer %d accepted after the inbox closed", seq)
			case err == nil:
				accepted[seq] = true
			case errors.Is(err, runtime.ErrInboxClosed):
				closed = true
			default:
				t.Errorf("Send(steer %d) = %v", seq, err)
			}
		}
	})
	evs, fin := run(t, a, t.Context(), &runtime.Request{Inbox: &inbox})
	wg.Wait()
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("finished %v", fin.Reason)
	}
	applied := map[int64]bool{}
	for _, s := range eventsOf[*runtime.SteerApplied](evs) {
		if s.Dropped {
			t.Errorf("steer %d dropped from a completed run", s.Seq)
		}
		applied[s.Seq] = true
	}
	for seq := range accepted {
		if !applied[seq] {
			t.Errorf("steer %d was accepted and never applied", seq)
		}
	}
	if len(applied) != len(accepted) {
		t.Errorf("%d steers applied, %d accepted", len(applied), len(accepted))
	}
	if err := inbox.Send(runtime.Steer{Seq: n + 1, Message: runtime.UserMessage("late")}); !errors.Is(err, runtime.ErrInboxClosed) || !strings.Contains(err.Error(), "no more steers") {
		t.Errorf("Send after the run = %v, want ErrInboxClosed", err)
	}
}

// A run whose consumer stops reading closes its inbox: nobody would learn what became
// of a steer sent after.
func TestInbox_ClosedWhenTheConsumerStops(t *testing.T) {
	for _, at := range []string{"RunStarted", "StepStarted"} {
		t.Run(at, func(t *testing.T) {
			m := &rt.Model{Steps: []rt.Step{rt.Say("one"), rt.Say("two")}}
			var inbox runtime.Inbox
			for ev := range newAgent(t, m, runtime.Config{}).Run(t.Context(), &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("hi")}, Inbox: &inbox}) {
				if strings.TrimPrefix(fmt.Sprintf("%T", ev), "*runtime.") == at {
					break
				}
			}
			if err := inbox.Send(runtime.Steer{Seq: 1, Message: runtime.UserMessage("anyone?")}); !errors.Is(err, runtime.ErrInboxClosed) {
				t.Errorf("Send after the consumer stopped at %s = %v, want ErrInboxClosed", at, err)
			}
		})
	}
}

// TestInbox_ClosedWhenTheRequestIsRefused: a run Run refuses takes no steer either.
func TestInbox_ClosedWhenTheRequestIsRefused(t *testing.T) {
	var inbox runtime.Inbox
	refused := false
	a := newAgent(t, &rt.Model{}, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}})
	clash := &runtime.Request{Inbox: &inbox, ClientTools: []runtime.Tool{rt.Tool("t", rt.Echo)}}
	for _, err := range a.Run(t.Context(), clash) {
		refused = err != nil
	}
	if !refused {
		t.Fatal("the run was not refused")
	}
	if err := inbox.Send(runtime.Steer{Seq: 1, Message: runtime.UserMessage("anyone?")}); !errors.Is(err, runtime.ErrInboxClosed) {
		t.Errorf("Send after a refused request = %v, want ErrInboxClosed", err)
	}
}
