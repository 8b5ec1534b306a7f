package runstate

import (
	goruntime "runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMap_GetKeepsOneStatePerRunAndDropForgetsIt(t *testing.T) {
	var m Map[int]
	a, b := &runtime.RunInfo{RunID: "same"}, &runtime.RunInfo{RunID: "same"}
	*m.Get(a) = 1
	*m.Get(b) = 2
	if got := *m.Get(a); got != 1 {
		t.Errorf("state of a = %d, want 1: runs with the same id must not share state", got)
	}
	if got := m.Len(); got != 2 {
		t.Errorf("Len = %d, want 2", got)
	}
	m.Drop(a)
	m.Drop(a) // twice is harmless
	if got := *m.Get(a); got != 0 {
		t.Errorf("state of a after Drop = %d, want a fresh 0", got)
	}
	m.Drop(a)
	m.Drop(b)
	if got := m.Len(); got != 0 {
		t.Errorf("Len after dropping all = %d, want 0", got)
	}
}

func TestMap_NilRunInfoIsNotKept(t *testing.T) {
	var m Map[int]
	*m.Get(nil) = 5
	m.Drop(nil)
	if got := *m.Get(nil); got != 0 || m.Len() != 0 {
		t.Errorf("Get(nil) = %d with Len %d, want a fresh 0 and nothing kept", got, m.Len())
	}
}

func TestMap_ForgetsRunsThatNeverReachAfterRun(t *testing.T) {
	var m Map[[64]byte]
	func() {
		for range 10 {
			m.Get(&runtime.RunInfo{RunID: "abandoned"})
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for m.Len() > 0 && time.Now().Before(deadline) {
		goruntime.GC()
		time.Sleep(time.Millisecond)
	}
	if n := m.Len(); n != 0 {
		t.Errorf("%d abandoned runs still have state after GC", n)
	}
}
