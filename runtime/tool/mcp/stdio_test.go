package mcp_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/logtest"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/tool/mcp"
)

var buildServer = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "testserver")
	out, err := exec.Command("go", "build", "-o", bin, "./internal/testserver").CombinedOutput()
	if err != nil {
		return "", errors.New(string(out))
	}
	return bin, nil
})

// stdioConfig returns the config of a test server process.
func stdioConfig(t *testing.T) mcp.ServerConfig {
	t.Helper()
	bin, err := buildServer()
	if err != nil {
		t.Fatalf("building the test server: %v", err)
	}
	return mcp.ServerConfig{Name: "proc", Command: bin}
}

func connectStdio(t *testing.T, cfg mcp.ServerConfig, opts ...mcp.Option) *mcp.Source {
	t.Helper()
	src, err := mcp.Connect(t.Context(), cfg, append([]mcp.Option{mcp.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// pid calls the pid tool.
func pid(t *testing.T, src *mcp.Source) int {
	t.Helper()
	out, err := call(t, find(t, src.Tools(), "pid"), `{}`)
	if err != nil {
		t.Fatalf("pid: %v", err)
	}
	n, err := strconv.Atoi(out.Text)
	if err != nil {
		t.Fatalf("pid: %q", out.Text)
	}
	return n
}

// alive reports whether a process of ours with the given id still exists (unreaped
// children count as existing).
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

func TestStdio(t *testing.T) {
	cfg := stdioConfig(t)
	cfg.Env = map[string]string{"GREETING": "hello"}
	cfg.Timeout = 200 * time.Millisecond
	t.Setenv("AGENTD_SECRET", "s3cret")
	src := connectStdio(t, cfg)

	want := []string{"add", "add_tool", "echo", "exit", "fail", "getenv", "image", "pid", "sleep"}
	if diff := cmp.Diff(want, names(src.Tools())); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]runtime.ToolPolicy{
		"add_tool": {Approval: runtime.ApprovalAsk},
		"exit":     {Approval: runtime.ApprovalAsk},
		"fail":     {Approval: runtime.ApprovalAsk},
	}, src.Policy().Tools); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		tool, args string
		want       runtime.Output
	}{
		{"echo", `{"text":"hi there"}`, runtime.Output{Text: "hi there"}},
		{"add", `{"a":2,"b":3}`, runtime.Output{Text: `{"sum":5}`, JSON: []byte(`{"sum":5}`)}},
		{"fail", `{}`, runtime.Output{Text: "it failed, as it always does", IsError: true}},
		{"getenv", `{"name":"GREETING"}`, runtime.Output{Text: "hello"}},
		{"getenv", `{"name":"AGENTD_SECRET"}`, runtime.Output{Text: "<unset>"}},
		{"getenv", `{"name":"PATH"}`, runtime.Output{Text: os.Getenv("PATH")}},
	} {
		got, err := call(t, find(t, src.Tools(), tc.tool), tc.args)
		if err != nil {
			t.Errorf("%s %s: %v", tc.tool, tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tc.tool, tc.args, diff)
		}
	}

	out, err := call(t, find(t, src.Tools(), "image"), `{}`)
	if err != nil || len(out.Media) != 1 || out.Media[0].MIMEType != "image/png" || !strings.HasPrefix(string(out.Media[0].Data), "\x89PNG\r\n") || out.Text != "" {
		t.Errorf("image: %+v, %v; want one PNG media part", out, err)
	}

	// A call past the timeout fails, and the server goes on serving.
	_, err = call(t, find(t, src.Tools(), "sleep"), `{"millis":10000}`)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no result within 200ms") {
		t.Errorf("sleep: %v, want a timeout", err)
	}
	if out, err := call(t, find(t, src.Tools(), "echo"), `{"text":"still here"}`); err != nil || out.Text != "still here" {
		t.Errorf("echo after a timeout: %+v, %v", out, err)
	}
}

func TestStdioCrashAndRestart(t *testing.T) {
	cfg := stdioConfig(t)
	refuse := filepath.Join(t.TempDir(), "refuse")
	cfg.Env = map[string]string{"TESTSERVER_REFUSE": refuse}
	var logs logtest.Buffer
	src := connectStdio(t, cfg, mcp.WithBackoff(10*time.Millisecond, 50*time.Millisecond), mcp.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	echo := find(t, src.Tools(), "echo")
	first := pid(t, src)

	// While the file exists, restarts fail.
	if err := os.WriteFile(refuse, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := call(t, find(t, src.Tools(), "exit"), `{"code":3}`)
	if !errors.Is(err, mcp.ErrUnavailable) || !strings.Contains(err.Error(), "the session ended during the call") {
		t.Errorf("exit: %v; want an error saying the server went away", err)
	}
	// The exit is logged with its status and the last line of standard error.
	eventually(t, "the exit is logged", func() bool {
		return strings.Contains(logs.String(), `error="the server process exited: exit status 3 (stderr: testserver: exiting with status 3 as asked)"`)
	})
	eventually(t, "a restart fails", func() bool {
		return strings.Contains(errString(src.Err()), "refusing to start")
	})
	_, err = call(t, echo, `{"text":"x"}`)
	if !errors.Is(err, mcp.ErrUnavailable) || !strings.Contains(err.Error(), `server "proc" is reconnecting after: connect:`) {
		t.Errorf("echo while down: %v", err)
	}
	eventually(t, "the crashed process is reaped", func() bool { return !alive(first) })

	if err := os.Remove(refuse); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the server is restarted", func() bool { return src.Err() == nil })
	if out, err := call(t, echo, `{"text":"back"}`); err != nil || out.Text != "back" {
		t.Errorf("echo after the restart: %+v, %v", out, err)
	}
	second := pid(t, src)
	if second == first {
		t.Errorf("same process %d after a restart", first)
	}
	if err := src.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if alive(second) {
		t.Errorf("process %d still exists after Close", second)
	}
}

func TestStdioListChanged(t *testing.T) {
	// The context bounds only the connecting; the process outlives it.
	ctx, cancel := context.WithCancel(t.Context())
	src, err := mcp.Connect(ctx, stdioConfig(t), mcp.WithLogger(quiet))
	cancel()
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer src.Close()
	changed := make(chan struct{}, 10)
	src.OnToolsChanged(func() { changed <- struct{}{} })
	if _, err := call(t, find(t, src.Tools(), "add_tool"), `{"name":"late"}`); err != nil {
		t.Fatalf("add_tool: %v", err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no change reported")
	}
	out, err := call(t, find(t, src.Tools(), "late"), `{}`)
	if err != nil || out.Text != "added late" {
		t.Errorf("late: %+v, %v", out, err)
	}
}

func TestStdioClose(t *testing.T) {
	src := connectStdio(t, stdioConfig(t))
	p := pid(t, src)
	// A call in progress fails when the source closes.
	done := make(chan error, 1)
	sleep := find(t, src.Tools(), "sleep")
	go func() {
		_, err := call(t, sleep, `{"millis":20000}`)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the call reach the server; either order passes
	start := time.Now()
	if err := src.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	// Close may give the process its stop grace and then end it: seconds on a loaded
	// machine. Only a Close that waited for the call takes about its 20s.
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("Close took %v: it waited for the call in progress", d)
	}
	if err := <-done; !errors.Is(err, mcp.ErrClosed) {
		t.Errorf("the call in progress: %v, want ErrClosed", err)
	}
	if alive(p) {
		t.Errorf("process %d still exists after Close", p)
	}
}

func TestStdioStartFailure(t *testing.T) {
	cfg := stdioConfig(t)
	refuse := filepath.Join(t.TempDir(), "refuse")
	if err := os.WriteFile(refuse, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Env = map[string]string{"TESTSERVER_REFUSE": refuse}
	src, err := mcp.Connect(t.Context(), cfg, mcp.WithLogger(quiet))
	if err == nil {
		src.Close()
		t.Fatal("Connect succeeded")
	}
	if !strings.Contains(err.Error(), `mcp server "proc": connect:`) || !strings.Contains(err.Error(), "(stderr: testserver: refusing to start:") {
		t.Errorf("Connect: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
