package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/agentdtest"
	"github.com/agentd/agentd/internal/logtest"
)

func TestMain(m *testing.M) {
	code := agentdtest.Main(m).Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// ctl says how agentctl runs in a test.
type ctl struct {
	stdin      io.Reader         // default: empty
	stdinTTY   bool              // read lines as typed, so that they steer
	env        map[string]string // the environment agentctl sees (EDITOR, …); nothing else
	interrupts chan os.Signal
	stdout     *logtest.Buffer // default: a new one
}

// result is what agentctl printed and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// agentctl runs agentctl with args, in process, and returns what it printed.
func (c ctl) run(t *testing.T, args ...string) result {
	t.Helper()
	if c.stdin == nil {
		c.stdin = strings.NewReader("")
	}
	if c.stdout == nil {
		c.stdout = &logtest.Buffer{}
	}
	stderr := &logtest.Buffer{}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	code := run(ctx, args, env{
		stdin:      c.stdin,
		stdout:     c.stdout,
		stderr:     stderr,
		getenv:     func(k string) string { return c.env[k] },
		stdinTTY:   c.stdinTTY,
		interrupts: c.interrupts,
	})
	return result{stdout: c.stdout.String(), stderr: stderr.String(), code: code}
}

// waitFor waits until b holds s, and fails the test after a while.
func waitFor(t *testing.T, b *logtest.Buffer, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(b.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output after 10s:\n%s", s, b.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
