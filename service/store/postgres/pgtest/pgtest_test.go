package pgtest_test

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/service/store/postgres/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }

// TestNeedsDatabase is the test that TestMainMakesSkipsSeen runs in a child test binary.
func TestNeedsDatabase(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") != "1" {
		t.Skip("run in a child process by TestMainMakesSkipsSeen")
	}
	pgtest.DSN(t)
}

// TestMainMakesSkipsSeen runs this test binary again, as go test runs it (without -v), with
// a database that refuses connections or with AGENTD_TEST_POSTGRES=skip, and checks its exit
// status and output: a database that cannot be reached fails the binary with one message,
// which go test then shows; a skip on purpose passes, except under CI.
func TestMainMakesSkipsSeen(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") == "1" {
		return
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "postgres://postgres@" + lis.Addr().String() + "/test?sslmode=disable"
	lis.Close()

	for _, tc := range []struct {
		name     string
		dsn, ci  string
		wantExit int
		want     string // in the output
	}{
		{name: "unreachable", dsn: refused, wantExit: 1, want: "*** POSTGRESQL: 1 TESTS SKIPPED, SO THE PACKAGE FAILS ***"},
		{name: "unreachable under CI", dsn: refused, ci: "true", wantExit: 1, want: "*** POSTGRESQL: 1 TESTS FAILED ***"},
		{name: "skip on purpose", dsn: "skip", wantExit: 0},
		{name: "skip under CI", dsn: "skip", ci: "true", wantExit: 1, want: "CI never passes by skipping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestNeedsDatabase$")
			cmd.Env = append(os.Environ(), "PGTEST_CHILD=1", "AGENTD_TEST_POSTGRES="+tc.dsn, "CI="+tc.ci)
			out, err := cmd.CombinedOutput()
			exit := 0
			if exitErr, ok := errors.AsType[*exec.ExitError](err); ok {
				exit = exitErr.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if exit != tc.wantExit || !strings.Contains(string(out), tc.want) {
				t.Errorf("exit status %d, want %d, and output containing %q:\n%s", exit, tc.wantExit, tc.want, out)
			}
			if tc.wantExit == 0 && strings.Contains(string(out), "POSTGRESQL:") {
				t.Errorf("a skip on purpose printed the message:\n%s", out)
			}
		})
	}
}
