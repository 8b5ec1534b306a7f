//go:build unix

package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The end-to-end run's settings.
const (
	// e2eKey signs continuations: fixed, so that a parked run's continuation stays valid
	// for the resume recipe whatever happens in between.
	e2eKey = "base64:/7YeE8kmxD9SeQgj3wEylR/MsMXXNqnImJaAbGVd9Ts="
	// e2eDrainPeriod and e2eShutdownTimeout bound how long agentd may take to stop.
	e2eDrainPeriod     = 5 * time.Second
	e2eShutdownTimeout = 10 * time.Second
	// e2eStartTimeout bounds the wait for agentd's health to answer SERVING.
	e2eStartTimeout = 30 * time.Second
	// e2eScriptTimeout bounds the recipes.
	e2eScriptTimeout = 2 * time.Minute
)

// TestEndToEndGrpcurlRecipes builds the real agentd, starts it on a loopback port with the
// demo agent, runs the README's grpcurl recipes against it (scripts/grpcurl-recipes.sh:
// list, describe, health, ListAgents, ExecuteRun, StartRun, a bidi Run from a heredoc, and
// a parked run resumed with an approval), then stops it with SIGTERM and checks that it
// exits 0 within its shutdown timeout.
//
// It needs grpcurl and jq: without them it is skipped, unless CI is set.
func TestEndToEndGrpcurlRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: builds and starts agentd; skipped with -short")
	}
	pathEnv := recipeTools(t)

	dir := t.TempDir()
	bin := filepath.Join(dir, "agentd")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -o %s .: %v\n%s", bin, err, out)
	}

	addr := freeLoopbackAddr(t)
	logPath := filepath.Join(dir, "agentd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	agentdLog := func() string {
		b, err := os.ReadFile(logPath)
		if err != nil {
			return err.Error()
		}
		return string(b)
	}

	agentd := exec.Command(bin,
		"--listen", addr,
		"--demo-delay", "0",
		"--drain-period", e2eDrainPeriod.String(),
		"--shutdown-timeout", e2eShutdownTimeout.String(),
	)
	agentd.Env = append(environWithout("AGENTD_"), "AGENTD_CONTINUATION_KEY="+e2eKey)
	agentd.Stdout, agentd.Stderr = logFile, logFile // files: no copying goroutines
	if err := agentd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = agentd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = agentd.Process.Kill()
			<-exited
		}
	})

	waitServing(t, addr, exited, agentdLog)

	ctx, cancel := context.WithTimeout(t.Context(), e2eScriptTimeout)
	defer cancel()
	script := exec.CommandContext(ctx, "bash", filepath.Join("..", "..", "scripts", "grpcurl-recipes.sh"))
	script.Env = append(environWithout("AGENTD_", "PATH="), "PATH="+pathEnv, "AGENTD_ADDR="+addr)
	// Its own process group, so that a timeout ends grpcurl and jq along with bash.
	script.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	script.Cancel = func() error { return syscall.Kill(-script.Process.Pid, syscall.SIGKILL) }
	script.WaitDelay = 5 * time.Second
	out, err := script.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/grpcurl-recipes.sh against %s: %v\n%s\n--- agentd log:\n%s", addr, err, out, agentdLog())
	}
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "===") || strings.HasPrefix(line, "ok: ") || strings.HasPrefix(line, "note: ") || strings.HasPrefix(line, "all ") {
			t.Log(strings.TrimRight(line, "\n"))
		}
	}

	if err := agentd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	sent := time.Now()
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("agentd ended with %v after SIGTERM, want exit status 0\n--- agentd log:\n%s", waitErr, agentdLog())
		}
		t.Logf("agentd exited 0 %s after SIGTERM", time.Since(sent).Round(time.Millisecond))
	case <-time.After(e2eShutdownTimeout):
		t.Fatalf("agentd still running %s (its shutdown timeout) after SIGTERM\n--- agentd log:\n%s", e2eShutdownTimeout, agentdLog())
	}
}

// recipeTools returns the PATH under which the recipes find grpcurl and jq: the test's
// own, with $(go env GOBIN) or $(go env GOPATH)/bin added where grpcurl was installed
// there but is not on PATH. Where a tool is missing it fails the test if CI is set, and
// skips it otherwise.
func recipeTools(t *testing.T) string {
	t.Helper()
	pathEnv := os.Getenv("PATH")
	var missing []string
	if _, err := exec.LookPath("grpcurl"); err != nil {
		if dir := goInstalled(t, "grpcurl"); dir != "" {
			pathEnv = dir + string(os.PathListSeparator) + pathEnv
		} else {
			missing = append(missing, "grpcurl (go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4)")
		}
	}
	if _, err := exec.LookPath("jq"); err != nil {
		missing = append(missing, "jq (apt-get install -y jq, or brew install jq)")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		missing = append(missing, "bash")
	}
	if len(missing) > 0 {
		msg := "the grpcurl recipes need " + strings.Join(missing, " and ")
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

// freeLoopbackAddr returns a loopback address whose port was free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// environWithout returns the test's environment without the variables whose
// "NAME=value" starts with one of the prefixes: a developer's AGENTD_* settings must not
// change what the test starts.
func environWithout(prefixes ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}

// waitServing polls agentd's health at addr until agentd.v1.AgentService answers
// SERVING, and fails the test if agentd exits first or e2eStartTimeout passes.
func waitServing(t *testing.T, addr string, exited <-chan struct{}, agentdLog func() string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(e2eStartTimeout)
	last := "no answer yet"
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			t.Fatalf("agentd exited before it served\n--- agentd log:\n%s", agentdLog())
		default:
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "agentd.v1.AgentService"})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = "status " + resp.GetStatus().String()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("agentd on %s did not answer SERVING within %s (last: %s)\n--- agentd log:\n%s", addr, e2eStartTimeout, last, agentdLog())
}
