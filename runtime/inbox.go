package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

var (
	// ErrInboxClosed is returned by Inbox.Send once the run has ended, or is about to end
	// with nothing left to apply: the steer would never be seen.
	ErrInboxClosed = errors.New("runtime: the run takes no more steers")
	// ErrInboxFull is matched (errors.Is) by the *InboxFullError of a steer past one of an
	// Inbox's bounds.
	ErrInboxFull = errors.New("runtime: inbox full")
)

// InboxLimit names one of an Inbox's bounds.
type InboxLimit uint8

// The bounds of an Inbox.
const (
	LimitSteers InboxLimit = iota + 1 // Inbox.MaxSteers
	LimitBytes                        // Inbox.MaxBytes
)

// InboxFullError refuses a steer that would take an Inbox past one of its bounds.
type InboxFullError struct {
	// Limit is the bound the steer would pass.
	Limit InboxLimit
	// Max is that bound; Want is what the inbox would hold with the steer, in the bound's
	// unit (steers, or bytes as Inbox.MaxBytes counts them).
	Max, Want int
}

func (e *InboxFullError) Error() string {
	unit := "steers"
	if e.Limit == LimitBytes {
		unit = "bytes"
	}
	return fmt.Sprintf("runtime: inbox full: %d %s, more than %d", e.Want, unit, e.Max)
}

// Is makes an InboxFullError match ErrInboxFull.
func (e *InboxFullError) Is(target error) bool { return target == ErrInboxFull }

// Inbox takes the steers of one run ([Request.Inbox]) from any goroutine. The run takes
// every steer sent so far before each model call; where it may end, it closes the inbox
// in the same step as finding it empty, so a steer Send accepted is always applied, or
// reported dropped (SteerApplied) when the run ends otherwise, or carried in the
// Pending of a parked run; Send refuses the rest with ErrInboxClosed.
//
// The zero value is ready to use. Set MaxSteers and MaxBytes before the inbox is shared;
// Send, from then on, is safe for concurrent use. An Inbox serves one run: once closed,
// it stays closed.
type Inbox struct {
	// MaxSteers bounds the steers sent and not yet taken by the run; 0 means no bound.
	MaxSteers int
	// MaxBytes bounds their size: the bytes of their parts' text and media data; 0 means
	// no bound.
	MaxBytes int

	mu         sync.Mutex
	queued     []Steer
	carried    int // steers a resumed run holds already (Carry): counted until the next take
	bytes      int // the size of queued and carried
	closed     bool
	interrupts uint64                  // interrupting steers sent so far
	cancel     context.CancelCauseFunc // the current step's, while one runs
}

// Send queues s for the run's next step. A steer with Interrupt set also stops the
// current step: the model call stops, calls not yet run are cancelled, and the steer is
// applied at once. Send never blocks. It returns ErrInboxClosed once the run takes no
// more steers, and an *InboxFullError (matching ErrInboxFull) past a bound; a refused
// steer changes nothing.
func (in *Inbox) Send(s Steer) error {
	size := steerSize(s.Message)
	in.mu.Lock()
	defer in.mu.Unlock()
	switch {
	case in.closed:
		return ErrInboxClosed
	case in.MaxSteers > 0 && len(in.queued)+in.carried >= in.MaxSteers:
		return &InboxFullError{Limit: LimitSteers, Max: in.MaxSteers, Want: len(in.queued) + in.carried + 1}
	case in.MaxBytes > 0 && in.bytes+size > in.MaxBytes:
		return &InboxFullError{Limit: LimitBytes, Max: in.MaxBytes, Want: in.bytes + size}
	}
	in.queued = append(in.queued, s)
	in.bytes += size
	if s.Interrupt {
		in.interrupts++
		if in.cancel != nil {
			in.cancel(errInterrupted)
		}
	}
	return nil
}

// Carry counts steers the run holds already, not yet applied, against the bounds, as
// if they were queued: a parked run's (Pending.Steers), which its resumed run applies at
// its next step. Without it every stretch of a run that parks and wakes would take its
// bounds' worth again. They count until the run's next step takes what is queued. Call
// it before the inbox is shared.
func (in *Inbox) Carry(steers []Steer) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, s := range steers {
		in.carried++
		in.bytes += steerSize(s.Message)
	}
}

// steerSize is what a steer counts against Inbox.MaxBytes.
func steerSize(m Message) int {
	n := 0
	for _, p := range m.Parts {
		n += len(p.Text) + len(p.Media.Data)
	}
	return n
}

// take returns the steers queued and empties the inbox, with the number of interrupts
// sent so far: a step that took them is interrupted only by a later one.
func (in *Inbox) take() ([]Steer, uint64) {
	if in == nil {
		return nil, 0
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.takeLocked(), in.interrupts
}

func (in *Inbox) takeLocked() []Steer {
	s := in.queued
	in.queued, in.carried, in.bytes = nil, 0, 0
	return s
}

// takeOrClose returns the steers queued, or, when there are none, closes the inbox.
func (in *Inbox) takeOrClose() []Steer {
	if in == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.queued) == 0 {
		in.closed = true
		return nil
	}
	return in.takeLocked()
}

// close refuses every later steer: Run has returned.
func (in *Inbox) close() {
	if in == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.closed = true
}

// interruptsSeen returns the number of interrupts sent so far.
func (in *Inbox) interruptsSeen() uint64 {
	if in == nil {
		return 0
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.interrupts
}

// attach makes an interrupting steer cancel the step; one sent since seen cancels it at
// once.
func (in *Inbox) attach(cancel context.CancelCauseFunc, seen uint64) {
	if in == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.cancel = cancel
	if in.interrupts != seen {
		cancel(errInterrupted)
	}
}

// detach ends the step.
func (in *Inbox) detach() {
	if in == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.cancel = nil
}
