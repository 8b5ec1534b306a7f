package main

import (
	"testing"

	"google.golang.org/grpc/credentials"

	"github.com/agentd/agentd/internal/agentdtest"
)

// agentdArgs are the flags of every agentd the tests start: the demo agent answers at
// once, and the log keeps warnings and errors alone.
var agentdArgs = []string{"--demo-delay", "0", "--log-level", "warn"}

// shared is the agentd that the tests share when they need nothing of their own.
var shared agentdtest.Shared

// agentdBinary returns the real agentd, built once per test binary.
func agentdBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and starts agentd; skipped with -short")
	}
	return agentdtest.Build(t, "../agentd")
}

// sharedAgentd returns the address of the shared agentd, started by the first test that
// asks for it and stopped once every test has run.
func sharedAgentd(t *testing.T) string {
	t.Helper()
	return shared.Start(t, agentdBinary(t), agentdtest.Options{Args: agentdArgs}).Addr
}

// startAgentd starts an agentd of the test's own with the extra flags, reached with creds
// (nil: plain text), and returns its address. It stops when the test ends.
func startAgentd(t *testing.T, creds credentials.TransportCredentials, extra ...string) string {
	t.Helper()
	args := append(append([]string(nil), agentdArgs...), extra...)
	return agentdtest.Start(t, agentdBinary(t), agentdtest.Options{Args: args, Creds: creds}).Addr
}
