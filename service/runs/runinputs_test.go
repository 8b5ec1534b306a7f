package runs

import (
	"testing"
)

// A run's inputs not yet answered are bounded in bytes: one past the bound is refused
// before it is stored, a single input of any size is taken, other runs are apart, and
// an answered input frees its bytes.
func TestRunInputs_Bounded(t *testing.T) {
	var s Manager
	const limit = 100
	first, err := s.holdInput("a", 60, limit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.holdInput("a", 50, limit); codeOf(err) != ResourceExhausted {
		t.Fatalf("past the bound: %v, want RESOURCE_EXHAUSTED", err)
	}
	other, err := s.holdInput("b", 500, limit) // alone, any size: the message size bounds it
	if err != nil {
		t.Fatalf("another run's input: %v", err)
	}
	first()
	again, err := s.holdInput("a", 50, limit)
	if err != nil {
		t.Fatalf("after the first was answered: %v", err)
	}
	again()
	other()
	if len(s.inputs.n) != 0 {
		t.Errorf("runs with nothing held still counted: %v", s.inputs.n)
	}
}
