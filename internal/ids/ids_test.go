package ids

import (
	"strings"
	"testing"
)

func TestNew_PrefixesAndDiffers(t *testing.T) {
	a, b := New("run"), New("run")
	if !strings.HasPrefix(a, "run_") || len(a) <= len("run_") || len(a) > len("run_")+13 {
		t.Errorf("New(%q) = %q, want run_ and 1 to 13 base-36 characters", "run", a)
	}
	if a == b {
		t.Errorf("two ids are both %q", a)
	}
}
