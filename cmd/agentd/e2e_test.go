//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/agentdtest"
)

// The end-to-end tests' settings.
const (
	// e2eDrainPeriod and e2eShutdownTimeout bound how long agentd may take to stop.
	e2eDrainPeriod     = 5 * time.Second
	e2eShutdownTimeout = 10 * time.Second
	// e2eStopWithin bounds the wait for agentd to exit after SIGTERM: its shutdown
	// timeout, and then time for a loaded machine to see the process out. Only an agentd
	// that outlives its shutdown timeout takes that long.
	e2eStopWithin = e2eShutdownTimeout + 20*time.Second
	// e2eScriptTimeout bounds the recipes.
	e2eScriptTimeout = 2 * time.Minute
)

// startAgentd builds this package's agentd and starts it with the end-to-end drain
// period and shutdown timeout, then args; env is added to its environment.
func startAgentd(t *testing.T, args []string, env ...string) *agentdtest.Process {
	t.Helper()
	return agentdtest.Start(t, agentdtest.Build(t, "."), agentdtest.Options{
		Args: append([]string{"--drain-period", e2eDrainPeriod.String(), "--shutdown-timeout", e2eShutdownTimeout.String()}, args...),
		Env:  env,
	})
}

// TestEndToEndGrpcurlRecipes builds the real agentd, starts it on a loopback port with the
// demo agent, runs the grpcurl recipes of docs/clients.md and docs/runs.md against it (scripts/grpcurl-recipes.sh:
// list, describe, health, ListAgents, ExecuteRun, StartRun, a bidi Run from a heredoc, and
// a parked run resumed with an approval), then stops it with SIGTERM and checks that it
// exits 0.
//
// It needs grpcurl and jq: without them it is skipped, unless CI is set.
func TestEndToEndGrpcurlRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: builds and starts agentd; skipped with -short")
	}
	pathEnv := recipeTools(t)
	agentd := startAgentd(t, []string{"--demo-delay", "0"})

	ctx, cancel := context.WithTimeout(t.Context(), e2eScriptTimeout)
	defer cancel()
	script := exec.CommandContext(ctx, "bash", filepath.Join("..", "..", "scripts", "grpcurl-recipes.sh"))
	script.Env = append(agentdtest.EnvironWithout("AGENTD_", "PATH="), "PATH="+pathEnv, "AGENTD_ADDR="+agentd.Addr)
	// Its own process group, so that a timeout ends grpcurl and jq along with bash.
	script.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	script.Cancel = func() error { return syscall.Kill(-script.Process.Pid, syscall.SIGKILL) }
	script.WaitDelay = 5 * time.Second
	out, err := script.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/grpcurl-recipes.sh against %s: %v\n%s\n--- agentd log:\n%s", agentd.Addr, err, out, agentd.Log())
	}
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "===") || strings.HasPrefix(line, "ok: ") || strings.HasPrefix(line, "note: ") || strings.HasPrefix(line, "all ") {
			t.Log(strings.TrimRight(line, "\n"))
		}
	}

	sent := time.Now()
	if err := agentd.Terminate(e2eStopWithin); err != nil {
		t.Fatalf("SIGTERM: %v, want exit status 0\n--- agentd log:\n%s", err, agentd.Log())
	}
	t.Logf("agentd exited 0 %s after SIGTERM", time.Since(sent).Round(time.Millisecond))
}

// TestEndToEndCurlRecipes builds the real agentd, starts it with its HTTP listener on a
// loopback port and the demo agent, runs the curl recipes of docs/http.md against it
// (scripts/curl-recipes.sh: plain JSON ListAgents and ExecuteRun, a bad request, StartRun
// streamed through the Connect protocol's framing, a parked run resumed, AttachRun and
// SendRunInput on a run waiting for an approval, a thread), then stops it with SIGTERM and
// checks that it exits 0.
//
// It needs curl and jq: without them it is skipped, unless CI is set.
func TestEndToEndCurlRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: builds and starts agentd; skipped with -short")
	}
	// docs/http.md's two helpers are the script's, character for character.
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "http.md"))
	if err != nil {
		t.Fatal(err)
	}
	recipes, err := os.ReadFile(filepath.Join("..", "..", "scripts", "curl-recipes.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, helper := range []string{"frame() {", "unframe() {"} {
		var lines []string
		for _, text := range []string{string(readme), string(recipes)} {
			for line := range strings.Lines(text) {
				if strings.HasPrefix(line, helper) {
					lines = append(lines, line)
				}
			}
		}
		if len(lines) != 2 || lines[0] != lines[1] {
			t.Errorf("%s…: docs/http.md and scripts/curl-recipes.sh must each define it once, the same: %q", helper, lines)
		}
	}
	pathEnv := recipeTools(t, "curl")
	httpAddr := agentdtest.FreeAddr(t)
	agentd := startAgentd(t, []string{"--demo-delay", "0", "--http-listen", httpAddr})

	ctx, cancel := context.WithTimeout(t.Context(), e2eScriptTimeout)
	defer cancel()
	script := exec.CommandContext(ctx, "bash", filepath.Join("..", "..", "scripts", "curl-recipes.sh"))
	script.Env = append(agentdtest.EnvironWithout("AGENTD_", "PATH="), "PATH="+pathEnv, "AGENTD_ADDR="+agentd.Addr, "AGENTD_HTTP=http://"+httpAddr)
	script.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	script.Cancel = func() error { return syscall.Kill(-script.Process.Pid, syscall.SIGKILL) }
	script.WaitDelay = 5 * time.Second
	out, err := script.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/curl-recipes.sh against %s: %v\n%s\n--- agentd log:\n%s", httpAddr, err, out, agentd.Log())
	}
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "===") || strings.HasPrefix(line, "ok: ") || strings.HasPrefix(line, "all ") {
			t.Log(strings.TrimRight(line, "\n"))
		}
	}
	if err := agentd.Terminate(e2eStopWithin); err != nil {
		t.Fatalf("SIGTERM: %v, want exit status 0\n--- agentd log:\n%s", err, agentd.Log())
	}
}

// recipeTools returns the PATH under which the recipes find grpcurl, jq and the other
// tools named: the test's own, with the folder of a grpcurl added when none is on PATH:
// one go install put in $(go env GOBIN) or $(go env GOPATH)/bin, else the module's own
// tool, built. Where jq, bash or another tool is missing it fails the test if CI is set,
// and skips it otherwise.
func recipeTools(t *testing.T, others ...string) string {
	t.Helper()
	pathEnv := os.Getenv("PATH")
	var missing []string
	if _, err := exec.LookPath("grpcurl"); err != nil {
		dir := goInstalled(t, "grpcurl")
		if dir == "" {
			// grpcurl is a tool of this module (go.mod's tool block, `go tool grpcurl`):
			// built at the version go.mod pins, the recipes always run.
			dir = filepath.Dir(agentdtest.Build(t, "github.com/fullstorydev/grpcurl/cmd/grpcurl"))
		}
		pathEnv = dir + string(os.PathListSeparator) + pathEnv
	}
	if _, err := exec.LookPath("jq"); err != nil {
		missing = append(missing, "jq (apt-get install -y jq, or brew install jq)")
	}
	for _, tool := range append([]string{"bash"}, others...) {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		msg := "the recipes need " + strings.Join(missing, " and ")
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; CI is set, so this fails instead of skipping")
		}
		t.Skip(msg)
	}
	return pathEnv
}

// goInstalled returns the folder where go install put the named command, or "".
func goInstalled(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		t.Logf("go env GOBIN GOPATH: %v", err)
		return ""
	}
	gobin, gopath, _ := strings.Cut(strings.TrimRight(string(out), "\n"), "\n")
	var dirs []string
	if gobin != "" {
		dirs = append(dirs, gobin)
	}
	for _, p := range filepath.SplitList(gopath) {
		if p != "" {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	for _, dir := range dirs {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return dir
		}
	}
	return ""
}
