// Package runstate keeps per-run state for hooks that outlive runs: a hook installed on
// the server sees every run, and must forget each one when it ends.
package runstate

import (
	goruntime "runtime"
	"sync"
	"weak"

	"github.com/agentd/agentd/runtime"
)

// Map holds one T per run, keyed by the run's *runtime.RunInfo, which the runtime passes
// to every hook point of a run and to no other run. Two concurrent runs never share an
// entry, even when their clients chose the same run id.
//
// An entry is created on first use and removed by [Map.Drop], which a hook calls from
// AfterRun. The runtime calls AfterRun for every run that reached BeforeRun, one whose
// consumer stopped reading included. An entry that no AfterRun drops is removed once the
// RunInfo is garbage collected, so a long-lived hook does not leak: the entry of a run
// whose consumer stopped at RunStarted (its hooks saw that event's OnEvent and nothing
// else), or one that OnEvent makes anew for the events after AfterRun (RunFinished).
//
// The zero Map is ready to use. A Map is safe for concurrent use; the *T it returns is
// not synchronised, which is enough because the runtime calls a run's hooks one at a time.
type Map[T any] struct {
	mu sync.Mutex
	m  map[weak.Pointer[runtime.RunInfo]]*entry[T]
}

type entry[T any] struct {
	v       T
	cleanup goruntime.Cleanup
}

// Get returns the state of in's run, a zero T on first use. A nil in gets a fresh T that
// is not kept.
func (m *Map[T]) Get(in *runtime.RunInfo) *T {
	if in == nil {
		return new(T)
	}
	k := weak.Make(in)
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.m[k]; ok {
		return &e.v
	}
	if m.m == nil {
		m.m = make(map[weak.Pointer[runtime.RunInfo]]*entry[T])
	}
	e := &entry[T]{}
	// The cleanup holds the weak key only, so it does not keep the RunInfo alive.
	e.cleanup = goruntime.AddCleanup(in, m.remove, k)
	m.m[k] = e
	return &e.v
}

// Drop forgets in's run.
func (m *Map[T]) Drop(in *runtime.RunInfo) {
	if in == nil {
		return
	}
	k := weak.Make(in)
	m.mu.Lock()
	e, ok := m.m[k]
	delete(m.m, k)
	m.mu.Unlock()
	if ok {
		e.cleanup.Stop()
	}
}

// Len returns the number of runs with state.
func (m *Map[T]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}

func (m *Map[T]) remove(k weak.Pointer[runtime.RunInfo]) {
	m.mu.Lock()
	delete(m.m, k)
	m.mu.Unlock()
}
