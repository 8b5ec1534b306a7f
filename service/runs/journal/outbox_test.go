package journal

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// blockingSend is a stream's Send whose client reads nothing until release is closed.
type blockingSend struct {
	release chan struct{}
	sent    []int64
}

func (b *blockingSend) send(f Frame) error {
	select {
	case <-b.release:
		b.sent = append(b.sent, seqOf(f))
		return nil
	case <-time.After(time.Hour):
		return errors.New("the stream ended")
	}
}

// seqOf returns the seq of a frame's event.
func seqOf(f Frame) int64 {
	ev, err := EventOf(f)
	if err != nil {
		panic(err)
	}
	return ev.GetSeq()
}

// put journals an event of seq seq.
func put(j *Journal, seq int64) {
	f, err := MarshalFrame(&agentdv1.RunEvent{Seq: seq})
	if err != nil {
		panic(err)
	}
	j.Append(f)
}

// Events go out in the order they were put, and flush waits until all have.
func TestOutbox_SendsInOrderAndFlushWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &blockingSend{release: make(chan struct{})}
		close(b.release)
		j := New(nil, false)
		o := NewOutbox(t.Context(), j, 0, nil, b.send, func(error) {})
		for i := range 200 {
			put(j, int64(i+1))
			if err := o.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		j.Close()
		if !o.Flush(t.Context(), time.Minute) {
			t.Fatal("flush reported a failure")
		}
		for i, seq := range b.sent {
			if seq != int64(i+1) {
				t.Fatalf("event %d went out as seq %d", i, seq)
			}
		}
		if len(b.sent) != 200 {
			t.Errorf("%d events sent, want 200", len(b.sent))
		}
	})
}

// A run whose client reads nothing waits once outboxSize events are queued: the client
// holds the model back.
func TestOutbox_WaitHoldsTheRunBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &blockingSend{release: make(chan struct{})}
		j := New(nil, false)
		o := NewOutbox(t.Context(), j, 0, nil, b.send, func(error) {})
		ctx, cancel := context.WithCancel(t.Context())
		n := 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ; n < 10*OutboxSize; n++ {
				put(j, int64(n+1))
				o.Wait(ctx)
			}
		}()
		synctest.Wait()
		if n > OutboxSize+1 {
			t.Errorf("%d events were journaled while the client read nothing, want at most %d", n, OutboxSize+1)
		}
		cancel() // the run ends: it stops waiting
		<-done
		o.Abandon()
		close(b.release)
		synctest.Wait()
	})
}

// A client that reads nothing after the run's last event is let go once the stall
// timeout has passed: flush reports it, and the sender goroutine ends with the stream.
func TestOutbox_FlushGivesUpOnAStalledClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &blockingSend{release: make(chan struct{})}
		j := New(nil, false)
		o := NewOutbox(t.Context(), j, 0, nil, b.send, func(error) {})
		put(j, 1)
		j.Close()
		start := time.Now()
		if o.Flush(t.Context(), 2*time.Minute) {
			t.Fatal("flush reported every event sent to a client that read nothing")
		}
		if waited := time.Since(start); waited < 2*time.Minute || waited > 3*time.Minute {
			t.Errorf("flush gave up after %s, want the stall timeout, 2m, or a little more", waited)
		}
		close(b.release) // the stream ends
		synctest.Wait()
		if len(b.sent) != 1 {
			t.Errorf("sent %v after the stall, want only the event in flight", b.sent)
		}
	})
}

// A failed send is reported once, and ends the outbox: a run that waits for it goes on
// with its error.
func TestOutbox_ASendThatFailsEndsTheOutbox(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		broken := errors.New("broken pipe")
		var failed []error
		j := New(nil, false)
		o := NewOutbox(t.Context(), j, 0, nil, func(Frame) error { return broken }, func(err error) { failed = append(failed, err) })
		for i := range OutboxSize + 1 {
			put(j, int64(i+1))
		}
		synctest.Wait()
		if err := o.Wait(t.Context()); !errors.Is(err, broken) {
			t.Errorf("wait after the failure: %v, want %v", err, broken)
		}
		if o.Flush(t.Context(), time.Minute) || !errors.Is(o.Failed(), broken) {
			t.Errorf("flush succeeded or failed() = %v", o.Failed())
		}
		if len(failed) != 1 {
			t.Errorf("onFail called %d times, want once", len(failed))
		}
	})
}

// The run and the stream's receive goroutine may both wait for room: once the client
// reads again, both go on (a single wake-up token left one of them waiting until the
// next heartbeat).
func TestOutbox_EveryWaiterGoesOnWhenTheClientReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &blockingSend{release: make(chan struct{})}
		j := New(nil, false)
		o := NewOutbox(t.Context(), j, 0, nil, b.send, func(error) {})
		for i := range OutboxSize + 1 { // one in flight, outboxSize behind
			put(j, int64(i+1))
			synctest.Wait()
		}
		var waiting sync.WaitGroup
		for range 2 {
			waiting.Go(func() { o.Wait(t.Context()) })
		}
		synctest.Wait()
		close(b.release) // the client reads again
		waiting.Wait()   // with a lost wake-up, this blocks the bubble for good
		j.Close()
		o.Flush(t.Context(), time.Minute)
	})
}

// A run putting and waiting, a receive goroutine waiting, and a client that reads at its
// own pace: nobody waits for ever, and every event goes out once, in order.
func TestOutbox_NoLostWakeUps(t *testing.T) {
	for seed := range 20 {
		synctest.Test(t, func(t *testing.T) {
			var sent []int64
			n := 0
			send := func(f Frame) error {
				n++
				if n%(seed+3) == 0 {
					time.Sleep(time.Millisecond) // the client is slow now and then
				}
				sent = append(sent, seqOf(f))
				return nil
			}
			j := New(nil, false)
			o := NewOutbox(t.Context(), j, 0, nil, send, func(error) {})
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			wg.Go(func() { // the receive goroutine
				for ctx.Err() == nil {
					o.Wait(ctx)
					time.Sleep(time.Duration(seed) * time.Microsecond)
				}
			})
			const events = 5000
			for i := range events {
				put(j, int64(i+1))
				o.Wait(t.Context())
			}
			cancel()
			wg.Wait()
			j.Close()
			if !o.Flush(t.Context(), time.Minute) {
				t.Fatal("flush failed")
			}
			if len(sent) != events {
				t.Fatalf("%d events sent, want %d", len(sent), events)
			}
			for i, seq := range sent {
				if seq != int64(i+1) {
					t.Fatalf("event %d went out as %d", i, seq)
				}
			}
		})
	}
}
