package service_test

import (
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/reasontest"
)

// TestReasonsDocumented holds the service's error reasons and the contract's closed lists
// of them (proto/agentd/v1) to each other: every reason the code can send is listed in
// the set it travels in and named by a constant in a reasons.go (the wire's here, the
// engine's in runs/, which Used reads as a package of its own), and every listed reason is
// sent. The daemon's own sources count as senders too, so that a reason only they send
// is not taken for an unused one.
func TestReasonsDocumented(t *testing.T) {
	doc, err := reasontest.Documented("../proto/agentd/v1")
	if err != nil {
		t.Fatal(err)
	}
	// ackError builds a RunError, but the one of an input_ack.
	uses, err := reasontest.Used(".", map[string]reasontest.Set{"ackError": reasontest.Ack})
	if err != nil {
		t.Fatal(err)
	}
	daemon, err := reasontest.Used("../cmd/agentd", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(uses) == 0 {
		t.Fatal("found no reason in the service's code")
	}
	if probs := reasontest.Diff(doc, append(uses, daemon...), reasontest.Rules{Exact: true, ConstFile: "reasons.go"}); len(probs) > 0 {
		t.Errorf("the code's reasons and the contract's lists disagree:\n%s", strings.Join(probs, "\n"))
	}
}
