package main

import (
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/reasontest"
)

// TestReasonsDocumented holds the daemon's own error reasons to the contract's closed
// lists (proto/agentd/v1). Its interceptors' refusals carry no ErrorInfo today, as the
// contract says; a reason one of them gains must be listed there first, and named by a
// constant in reasons.go. Whether every listed reason is sent is the service's test.
func TestReasonsDocumented(t *testing.T) {
	doc, err := reasontest.Documented("../../proto/agentd/v1")
	if err != nil {
		t.Fatal(err)
	}
	uses, err := reasontest.Used(".", nil)
	if err != nil {
		t.Fatal(err)
	}
	if probs := reasontest.Diff(doc, uses, reasontest.Rules{ConstFile: "reasons.go"}); len(probs) > 0 {
		t.Errorf("the daemon's reasons and the contract's lists disagree:\n%s", strings.Join(probs, "\n"))
	}
}
