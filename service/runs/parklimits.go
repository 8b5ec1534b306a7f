package runs

import (
	"fmt"
	"sync"
)

// A parked run runs nothing, but its checkpoint stays in the store (on the heap with a
// memory store) until ParkTimeout, and it holds no slot of MaxConcurrentRuns: parkedLoad
// bounds what waits so. It counts the runs this server parked, took up or recovered
// parked. With a shared store a run that parks is let go at once (publishPark), so it
// counts only while it parks: the caps bound what this process holds, not what the
// shared store holds for every replica.

// parkLimitError is why a run did not park: parking it would pass a cap, named as its
// Config field, at max.
type parkLimitError struct {
	limit string
	max   int64
}

// Error names the cap.
func (e *parkLimitError) Error() string {
	return fmt.Sprintf("parking the run would pass %s (%d)", e.limit, e.max)
}

// parkLimits are the caps of Config's MaxParked fields; a negative one is off.
type parkLimits struct {
	runs, callerRuns, bytes, callerBytes int64
}

// parkLimitsOf returns the caps cfg names, its defaults filled in.
func parkLimitsOf(cfg *Config) parkLimits {
	or := func(v, def int64) int64 {
		if v == 0 {
			return def
		}
		return v
	}
	quarter := func(v int64) int64 {
		if v < 0 {
			return -1
		}
		return max(1, v/4)
	}
	l := parkLimits{runs: or(int64(cfg.MaxParkedRuns), 4*int64(cfg.MaxConcurrentRuns)), bytes: or(cfg.MaxParkedBytes, 256<<20)}
	l.callerRuns, l.callerBytes = or(int64(cfg.MaxParkedRunsPerCaller), quarter(l.runs)), or(cfg.MaxParkedBytesPerCaller, quarter(l.bytes))
	return l
}

// parkHold is one parked run's place in a parkedLoad.
type parkHold struct {
	caller string
	bytes  int64
}

// parkedShare is what one caller has parked.
type parkedShare struct{ runs, bytes int64 }

// parkedLoad counts the runs parked on a server and their checkpoints' bytes, in all
// and per caller. It is safe for concurrent use; callers with nothing parked take no
// memory.
type parkedLoad struct {
	limits  parkLimits
	mu      sync.Mutex
	all     parkedShare
	callers map[string]parkedShare
}

// hold counts a run of caller ("" for an anonymous one) parking a checkpoint of bytes,
// unless that would pass a cap; force counts it whatever the caps, for a run parked
// already (taken up from the store), which the caps cannot refuse.
func (l *parkedLoad) hold(caller string, bytes int64, force bool) (*parkHold, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	mine := l.callers[caller]
	if !force {
		over := func(n, limit int64) bool { return limit >= 0 && n > limit }
		switch {
		case caller != "" && over(mine.runs+1, l.limits.callerRuns):
			return nil, &parkLimitError{limit: "MaxParkedRunsPerCaller", max: l.limits.callerRuns}
		case caller != "" && over(mine.bytes+bytes, l.limits.callerBytes):
			return nil, &parkLimitError{limit: "MaxParkedBytesPerCaller", max: l.limits.callerBytes}
		case over(l.all.runs+1, l.limits.runs):
			return nil, &parkLimitError{limit: "MaxParkedRuns", max: l.limits.runs}
		case over(l.all.bytes+bytes, l.limits.bytes):
			return nil, &parkLimitError{limit: "MaxParkedBytes", max: l.limits.bytes}
		}
	}
	l.all.runs++
	l.all.bytes += bytes
	if caller != "" {
		if l.callers == nil {
			l.callers = map[string]parkedShare{}
		}
		l.callers[caller] = parkedShare{runs: mine.runs + 1, bytes: mine.bytes + bytes}
	}
	return &parkHold{caller: caller, bytes: bytes}, nil
}

// release uncounts what hold counted; nil is nothing.
func (l *parkedLoad) release(h *parkHold) {
	if h == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all.runs--
	l.all.bytes -= h.bytes
	if h.caller == "" {
		return
	}
	mine := l.callers[h.caller]
	if mine.runs--; mine.runs <= 0 {
		delete(l.callers, h.caller)
		return
	}
	mine.bytes -= h.bytes
	l.callers[h.caller] = mine
}

// holdPark counts ss parking a checkpoint of bytes, or says which cap refuses it. The
// caller counted is Config.Caller's for the RPC that last started or woke the run, or,
// for a run taken up from the store before any woke it, the identity that owns it.
func (s *Manager) holdPark(ss *session, bytes int64, force bool) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	caller := ss.callerName
	if caller == "" {
		caller = ss.owner
	}
	h, err := s.parkedLoad.hold(caller, bytes, force)
	if err != nil {
		return err
	}
	s.parkedLoad.release(ss.parkHold) // none, unless a park was never let go of
	ss.parkHold = h
	return nil
}

// dropParkLocked uncounts ss's park, if it counted one: the run woke, expired, ended,
// or this server let it go. Called with ss.mu held.
func (ss *session) dropParkLocked() {
	ss.srv.parkedLoad.release(ss.parkHold)
	ss.parkHold = nil
}
