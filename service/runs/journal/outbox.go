package journal

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// ErrClientStalled is the cause of a run whose client read nothing for the stall timeout.
var ErrClientStalled = errors.New("the client read nothing for too long")

// OutboxSize is how many events a run may have journaled beyond what the stream that
// started it has sent before it waits for that client: little beyond what gRPC itself
// holds (64 KiB a stream), so that flow control still holds the model back when the
// client reads slowly.
const OutboxSize = 64

// Outbox carries a run's events to one stream: the frames of the run's journal from its
// cursor on, in order, and before them the stream's own unnumbered frames (attached,
// heartbeats), sent by the one goroutine that sends on the stream. No lock that input
// handling needs (acks, cancel) is held across a Send that flow control can block, and a
// stream whose client reads nothing can be let go: the handler returns while that
// goroutine is still blocked in Send, and gRPC then ends the stream, which ends the Send.
//
// The outbox ends once it has sent the journal's last frame after the journal closed (the
// run ended), when a send fails, when it is abandoned, and when the journal no longer
// keeps the frame it would send next (ErrEventsExpired). Every method may be called from
// any goroutine.
type Outbox struct {
	// ID is the stream's attachment_id; empty for the one that started the run.
	ID string
	// Runs is set on a Run stream's outbox, whose client answers the run on it.
	Runs bool
	// Release gives back the caller's attachment (attach) once the stream is let go; nil
	// for the stream that started the run.
	Release func()

	ctx    context.Context // the stream's: it bounds reads from the store
	j      *Journal
	send   func(Frame) error
	onFail func(error) // called once, on the sender's goroutine, when a send fails

	mu        sync.Mutex
	side      []Frame     // unnumbered frames, sent before the journal's next
	abandoned atomic.Bool // let go: nothing more is sent
	err       error       // why the outbox ended early: the failed send's error, or ErrEventsExpired
	wake      chan struct{}
	// space is closed, and replaced, when a frame went out while someone waited for room:
	// the run and the stream's receive goroutine may both wait (broadcast, not a token).
	space        chan struct{}
	spaceWaiters atomic.Int32
	done         chan struct{} // closed when the sender returns

	// cursor is the seq of the last journal frame sent.
	cursor atomic.Int64
	// sendingSince is when the send in progress started (unix nanoseconds), 0 when none
	// is: how long the client has read nothing.
	sendingSince atomic.Int64
	// lastSend is when the last send started, or a heartbeat was queued (unix
	// nanoseconds): how long the stream has been silent.
	lastSend atomic.Int64
	beat     *time.Timer // the heartbeat's, once StartHeartbeats armed it
}

// NewOutbox starts sending j's frames after seq after, behind side, on the stream of
// ctx.
func NewOutbox(ctx context.Context, j *Journal, after int64, side []Frame, send func(Frame) error, onFail func(error)) *Outbox {
	o := &Outbox{ctx: ctx, j: j, send: send, onFail: onFail, side: side, wake: make(chan struct{}, 1), space: make(chan struct{}), done: make(chan struct{})}
	o.cursor.Store(after)
	o.lastSend.Store(time.Now().UnixNano())
	go o.run()
	return o
}

// StartHeartbeats has the outbox send a heartbeat naming the last seq it sent after
// every interval the stream was silent with nothing to send, until it ends: whoever
// runs the run, here, elsewhere or nobody for a while (a store that does not answer),
// the client knows the stream is alive. It costs a timer that fires once an interval,
// not one reset per frame. Called once, before any other goroutine may end the outbox.
func (o *Outbox) StartHeartbeats(every time.Duration, runID string, now func() time.Time) {
	var beat func()
	beat = func() {
		select {
		case <-o.done:
			return
		default:
		}
		silent := time.Duration(time.Now().UnixNano() - o.lastSend.Load())
		if silent >= every {
			o.mu.Lock()
			quiet := o.err == nil && !o.abandoned.Load() && len(o.side) == 0 &&
				o.sendingSince.Load() == 0 && o.j.VisibleSeq() <= o.cursor.Load()
			o.mu.Unlock()
			if quiet {
				// Behind events the client has not read yet, a heartbeat says nothing.
				f, err := MarshalFrame(&agentdv1.RunEvent{RunId: runID, Time: timestamppb.New(now()),
					Kind: &agentdv1.RunEvent_Heartbeat{Heartbeat: &agentdv1.Heartbeat{LastSeq: o.cursor.Load()}}})
				if err == nil {
					o.PutSide(f)
				}
			}
			o.lastSend.Store(time.Now().UnixNano())
			silent = 0
		}
		o.mu.Lock()
		o.beat.Reset(every - silent)
		o.mu.Unlock()
	}
	o.mu.Lock()
	o.beat = time.AfterFunc(every, beat)
	o.mu.Unlock()
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// PutSide queues an unnumbered frame, sent before the journal's next.
func (o *Outbox) PutSide(f Frame) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil || o.abandoned.Load() {
		return
	}
	o.side = append(o.side, f)
	signal(o.wake)
}

// Cursor returns the seq of the last journal frame sent.
func (o *Outbox) Cursor() int64 { return o.cursor.Load() }

// Behind returns how many journaled frames wait to be sent.
func (o *Outbox) Behind() int64 { return o.j.last.Load() - o.cursor.Load() }

// Wait blocks while the stream is OutboxSize frames behind the journal: the client is
// behind, and the run waits for it (backpressure). It returns when there is room, when
// ctx is done (the run unwinds without waiting), or with the error of an outbox that
// ended early.
func (o *Outbox) Wait(ctx context.Context) error {
	if o.Behind() < OutboxSize {
		return nil // the common case, once per event: an ended outbox shows at the next wait
	}
	for {
		o.mu.Lock()
		// Counted before the check, and the sender counts its cursor before it looks at
		// the count: either this check sees the room, or the sender sees this waiter.
		o.spaceWaiters.Add(1)
		if err := o.err; err != nil || o.Behind() < OutboxSize || o.abandoned.Load() {
			o.spaceWaiters.Add(-1)
			o.mu.Unlock()
			return err
		}
		space := o.space
		o.mu.Unlock()
		select {
		case <-space:
		case <-o.done:
			o.mu.Lock()
			err := o.err
			o.mu.Unlock()
			return err
		case <-ctx.Done():
			return nil
		}
	}
}

// freeSpace wakes everyone waiting for room.
func (o *Outbox) freeSpace() {
	if o.spaceWaiters.Load() == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	close(o.space)
	o.space = make(chan struct{})
	o.spaceWaiters.Store(0)
}

// Failed returns why the outbox ended early, if it did.
func (o *Outbox) Failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// StalledFor returns how long the send in progress has waited for the client.
func (o *Outbox) StalledFor() time.Duration {
	since := o.sendingSince.Load()
	if since == 0 {
		return 0
	}
	return time.Since(time.Unix(0, since))
}

// Stop ends the outbox early for err: nothing more is sent, and its stream ends with
// what err says.
func (o *Outbox) Stop(err error) {
	o.mu.Lock()
	if o.err == nil {
		o.err = err
	}
	o.mu.Unlock()
	o.Abandon()
}

// Abandon lets the stream go: nothing more is sent to it.
func (o *Outbox) Abandon() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.abandoned.Store(true)
	o.side = nil
	signal(o.wake)
	if o.spaceWaiters.Load() > 0 {
		close(o.space)
		o.space = make(chan struct{})
		o.spaceWaiters.Store(0)
	}
}

// Flush waits until the outbox ends, or its client has read nothing for stall, or ctx
// is done. It reports whether everything went out.
func (o *Outbox) Flush(ctx context.Context, stall time.Duration) bool {
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
		case <-ctx.Done():
			return false
		case <-check.C:
			if o.StalledFor() >= stall {
				o.Abandon()
				return false
			}
			check.Reset(stall / 4)
		}
	}
}

// end records why the outbox ended early.
func (o *Outbox) end(err error) {
	o.mu.Lock()
	o.err = err
	o.side = nil
	o.mu.Unlock()
	o.freeSpace()
	o.onFail(err)
}

// sendOne sends f, reporting false when the outbox ended.
func (o *Outbox) sendOne(f Frame) bool {
	if o.abandoned.Load() {
		return false
	}
	start := time.Now().UnixNano()
	o.sendingSince.Store(start)
	o.lastSend.Store(start)
	err := o.send(f)
	o.sendingSince.Store(0)
	if err != nil {
		o.end(err)
		return false
	}
	return true
}

// run sends the side frames and the journal's frames until the outbox ends.
func (o *Outbox) run() {
	defer func() {
		close(o.done)
		o.mu.Lock()
		if o.beat != nil {
			o.beat.Stop()
		}
		o.mu.Unlock()
	}()
	var batch []Frame
	for {
		o.mu.Lock()
		side := o.side
		o.side = nil
		o.mu.Unlock()
		for _, f := range side {
			if !o.sendOne(f) {
				return
			}
		}
		if o.abandoned.Load() {
			return
		}
		frames, changed, done, err := o.j.Read(o.ctx, o.cursor.Load(), OutboxSize, batch[:0])
		if err != nil {
			o.end(err)
			return
		}
		if len(frames) == 0 {
			if done {
				return
			}
			select {
			case <-changed:
			case <-o.wake:
			}
			continue
		}
		for i, f := range frames {
			ok := o.sendOne(f)
			frames[i] = nil
			if !ok {
				return
			}
			o.cursor.Add(1)
			o.freeSpace()
		}
		batch = frames
	}
}
