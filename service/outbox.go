package service

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// errClientStalled is the cause of a run whose client read nothing for the stall timeout.
var errClientStalled = errors.New("the client read nothing for too long")

// outboxSize is how many events a run may have queued for its stream before it waits for
// the client: little beyond what gRPC itself holds (64 KiB a stream), so that flow
// control still holds the model back when the client reads slowly.
const outboxSize = 64

// outbox carries one stream's events, in order, to the one goroutine that sends them, so
// that no lock that input handling needs (acks, cancel) is held across a Send that flow
// control can block, and so that a stream whose client reads nothing can be let go:
// the handler returns while that goroutine is still blocked in Send, and gRPC then ends
// the stream, which ends the Send.
//
// put, wait and flush may be called from any goroutine.
type outbox struct {
	send   func(*agentdv1.RunEvent) error
	onFail func(error) // called once, on the sender's goroutine, when a send fails

	mu        sync.Mutex
	queue     []*agentdv1.RunEvent
	closed    bool          // nothing more is put; the sender ends once the queue is sent
	abandoned atomic.Bool   // the client stalled: events are dropped
	err       error         // the failed send's error
	wake      chan struct{} // the sender's: something was put, or the outbox closed
	// space is closed, and replaced, when the queue empties while someone waits for room:
	// the run and the stream's receive goroutine may both wait (broadcast, not a token).
	space        chan struct{}
	spaceWaiters int
	done         chan struct{} // closed when the sender returns

	// queued is len(queue), for wait's check without the lock on every event.
	queued atomic.Int32

	// sendingSince is when the send in progress started (unix nanoseconds), 0 when none
	// is: how long the client has read nothing.
	sendingSince atomic.Int64
}

func newOutbox(send func(*agentdv1.RunEvent) error, onFail func(error)) *outbox {
	o := &outbox{send: send, onFail: onFail, wake: make(chan struct{}, 1), space: make(chan struct{}), done: make(chan struct{})}
	go o.run()
	return o
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// put queues ev. It returns the error of a send that failed, after which nothing more
// is sent.
func (o *outbox) put(ev *agentdv1.RunEvent) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.err != nil:
		return o.err
	case o.closed || o.abandoned.Load():
		return nil
	}
	o.queue = append(o.queue, ev)
	o.queued.Store(int32(len(o.queue)))
	if len(o.queue) == 1 {
		signal(o.wake)
	}
	return nil
}

// pending reports whether events wait to be sent.
func (o *outbox) pending() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.queue) > 0 || o.sendingSince.Load() != 0
}

// wait blocks while the queue is full: the client is behind, and the run waits for it
// (backpressure). It returns when there is room, when ctx is done (the run unwinds
// without waiting), or with the error of a failed send.
func (o *outbox) wait(ctx context.Context) error {
	if o.queued.Load() < outboxSize {
		return nil // the common case, once per event: a failed send shows at the next put
	}
	for {
		o.mu.Lock()
		if err := o.err; err != nil || len(o.queue) < outboxSize || o.abandoned.Load() {
			o.mu.Unlock()
			return err
		}
		space := o.space
		o.spaceWaiters++
		o.mu.Unlock()
		select {
		case <-space:
		case <-o.done:
		case <-ctx.Done():
			return nil
		}
	}
}

// freeSpaceLocked wakes everyone waiting for room in the queue.
func (o *outbox) freeSpaceLocked() {
	if o.spaceWaiters > 0 {
		close(o.space)
		o.space, o.spaceWaiters = make(chan struct{}), 0
	}
}

// failed returns the error of the send that failed, if one did.
func (o *outbox) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// stalledFor returns how long the send in progress has waited for the client.
func (o *outbox) stalledFor() time.Duration {
	since := o.sendingSince.Load()
	if since == 0 {
		return 0
	}
	return time.Since(time.Unix(0, since))
}

// abandon drops what is queued and whatever is put later: the client stalled.
func (o *outbox) abandon() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.abandoned.Store(true)
	clear(o.queue)
	o.queue = o.queue[:0]
	o.queued.Store(0)
	o.freeSpaceLocked()
	signal(o.wake)
}

// flush closes the outbox and waits until everything queued was sent, or a send failed,
// or the client has read nothing for stall. It reports whether everything went out.
func (o *outbox) flush(stall time.Duration) bool {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	signal(o.wake)
	if o.abandoned.Load() {
		return false
	}
	check := time.NewTimer(stall / 4)
	defer check.Stop()
	for {
		select {
		case <-o.done:
			o.mu.Lock()
			defer o.mu.Unlock()
			return o.err == nil && !o.abandoned.Load()
		case <-check.C:
			if o.stalledFor() >= stall {
				o.abandon()
				return false
			}
			check.Reset(stall / 4)
		}
	}
}

// run sends the queued events until the outbox is closed and empty, or a send fails.
func (o *outbox) run() {
	defer close(o.done)
	var batch []*agentdv1.RunEvent
	for {
		o.mu.Lock()
		for len(o.queue) == 0 && !o.closed && !o.abandoned.Load() {
			o.mu.Unlock()
			<-o.wake
			o.mu.Lock()
		}
		if len(o.queue) == 0 {
			o.mu.Unlock()
			return
		}
		batch, o.queue = o.queue, batch[:0]
		o.queued.Store(0)
		o.freeSpaceLocked()
		o.mu.Unlock()
		for i, ev := range batch {
			if o.abandoned.Load() {
				clear(batch)
				break
			}
			o.sendingSince.Store(time.Now().UnixNano())
			err := o.send(ev)
			o.sendingSince.Store(0)
			batch[i] = nil
			if err != nil {
				o.mu.Lock()
				o.err = err
				clear(o.queue)
				o.queue = nil
				o.queued.Store(0)
				o.freeSpaceLocked()
				o.mu.Unlock()
				o.onFail(err)
				return
			}
		}
	}
}
