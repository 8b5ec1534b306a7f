package provider

import (
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	p := NewPolicy(0, 100*time.Millisecond)
	if p.MaxRetries != DefaultMaxRetries {
		t.Fatalf("MaxRetries = %d, want %d", p.MaxRetries, DefaultMaxRetries)
	}
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond} {
		d, ok := p.Delay(n, 0)
		if !ok || d > want || d < want*3/4 {
			t.Errorf("Delay(%d) = %v, %t; want within [%v, %v]", n, d, ok, want*3/4, want)
		}
	}
	if _, ok := p.Delay(3, 0); ok {
		t.Error("Delay(3) allowed a third retry of a policy with two")
	}
	if d, ok := p.Delay(1, 3*time.Second); !ok || d != 3*time.Second {
		t.Errorf("Delay with Retry-After 3s = %v, %t; want exactly 3s", d, ok)
	}
	if _, ok := p.Delay(1, 2*time.Minute); ok {
		t.Error("a Retry-After above MaxRetryAfter was waited for")
	}
	if _, ok := NewPolicy(-1, 0).Delay(1, 0); ok {
		t.Error("a negative MaxRetries allowed a retry")
	}
	long := NewPolicy(20, time.Second)
	if d, _ := long.Delay(20, 0); d > DefaultMaxBackoff {
		t.Errorf("Delay(20) = %v, above the cap %v", d, DefaultMaxBackoff)
	}
}
