package agentdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// ContinuationKey is the continuation key Start gives agentd (AGENTD_CONTINUATION_KEY)
// unless Options.Env names another: fixed, so that a continuation stays valid from one
// process to the next.
const ContinuationKey = "base64:/7YeE8kmxD9SeQgj3wEylR/MsMXXNqnImJaAbGVd9Ts="

// Bounds of the waits on agentd. Each is far beyond what agentd takes on a loaded
// machine: reaching one means agentd is broken, not slow.
const (
	// startTimeout bounds the wait for agentd's health to answer SERVING.
	startTimeout = time.Minute
	// stopTimeout bounds the wait for agentd to exit after SIGTERM when a test ends; it
	// is killed then.
	stopTimeout = 30 * time.Second
	// portAttempts is how many free ports Start tries: another process may take the
	// port between the moment it is found free and agentd's bind.
	portAttempts = 3
)

// environPrefixes are the variables of the test's environment that agentd does not
// inherit: a developer's settings must not change what a test starts.
var environPrefixes = []string{"AGENTD_", "OTEL_", "OPENAI_", "ANTHROPIC_"}

// Options say how [Start] runs agentd.
type Options struct {
	// Args are agentd's flags. Start adds --listen with a free loopback port.
	Args []string
	// Env is added to agentd's environment: the test's own without its AGENTD_*, OTEL_*,
	// OPENAI_* and ANTHROPIC_* variables, and with AGENTD_CONTINUATION_KEY set to
	// [ContinuationKey]. Of a variable named twice, the last value counts.
	Env []string
	// Creds reach agentd, for the health check and [Process.Dial]; nil means plain text.
	Creds credentials.TransportCredentials
}

// Process is a running agentd. Its methods are safe for concurrent use.
type Process struct {
	// Addr is the loopback address agentd serves gRPC on, "127.0.0.1:port".
	Addr string

	cmd     *exec.Cmd
	creds   credentials.TransportCredentials
	logPath string
	exited  chan struct{} // closed once cmd.Wait returned
	waitErr error         // cmd.Wait's, read once exited is closed

	mu      sync.Mutex
	stopped bool // Terminate or stop has run
}

// Start starts the agentd at bin (see [Build]) on a free loopback port and returns once
// its health check answers SERVING for agentd.v1.AgentService. agentd's standard output
// and error go to a file that [Process.Log] reads. When the test ends, agentd gets
// SIGTERM, and is killed if it has not exited 30s later.
func Start(t testing.TB, bin string, o Options) *Process {
	t.Helper()
	p, err := start(bin, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return p
}

// Shared is an agentd that the tests of a binary share. The zero value is ready to use;
// it is safe for concurrent use.
type Shared struct {
	once sync.Once
	p    *Process
	err  error
}

// Start returns the shared agentd: the first call starts it as [Start] does, later calls
// return the same process, or fail their test as the first one did. [Main] stops it once
// every test has run.
func (s *Shared) Start(t testing.TB, bin string, o Options) *Process {
	t.Helper()
	s.once.Do(func() {
		if s.p, s.err = start(bin, o); s.err == nil {
			mu.Lock()
			shared = append(shared, s.p)
			mu.Unlock()
		}
	})
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.p
}

// errPortTaken is the failure of an agentd that could not bind its port.
var errPortTaken = errors.New("agentd's port was taken")

// start runs agentd until it serves, on another port when its port was taken.
func start(bin string, o Options) (*Process, error) {
	for attempt := 1; ; attempt++ {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		p, err := launch(bin, o, addr)
		if err != nil {
			return nil, err
		}
		err = p.waitServing()
		if err == nil {
			return p, nil
		}
		p.stop()
		if !errors.Is(err, errPortTaken) || attempt == portAttempts {
			return nil, err
		}
	}
}

// launch starts the process, listening on addr.
func launch(bin string, o Options, addr string) (*Process, error) {
	d, err := workDir()
	if err != nil {
		return nil, err
	}
	logf, err := os.CreateTemp(d, "agentd-*.log")
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, append([]string{"--listen", addr}, o.Args...)...)
	cmd.Env = append(EnvironWithout(environPrefixes...), "AGENTD_CONTINUATION_KEY="+ContinuationKey)
	cmd.Env = append(cmd.Env, o.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf // a file: no copying goroutines
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	creds := o.Creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	p := &Process{Addr: addr, cmd: cmd, creds: creds, logPath: logf.Name(), exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// EnvironWithout returns the test's environment without the variables whose
// "NAME=value" starts with one of prefixes: a developer's own settings must not change
// what a test starts.
func EnvironWithout(prefixes ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, prefix := range prefixes {
			if strings.HasPrefix(kv, prefix) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}

// waitServing polls agentd's health, which needs no token, until it answers SERVING.
func (p *Process) waitServing() error {
	conn, err := grpc.NewClient(p.Addr, grpc.WithTransportCredentials(p.creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(startTimeout)
	last := "no answer yet"
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			log := p.Log()
			if strings.Contains(log, "address already in use") {
				return fmt.Errorf("%w: %s", errPortTaken, strings.TrimSpace(log))
			}
			return fmt.Errorf("agentd exited (%s) before it served\n--- agentd log:\n%s", p.exitStatus(), log)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "agentd.v1.AgentService"})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = "status " + resp.GetStatus().String()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("agentd on %s did not answer SERVING within %s (last: %s)\n--- agentd log:\n%s", p.Addr, startTimeout, last, p.Log())
}

// Log returns what agentd has written to its standard output and error so far.
func (p *Process) Log() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(agentd's log: " + err.Error() + ")"
	}
	return string(b)
}

// Pid returns agentd's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Dial returns a client connection to agentd with the process's Options.Creds, which
// opts may replace, closed when the test ends.
func (p *Process) Dial(t testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(p.Addr, append([]grpc.DialOption{grpc.WithTransportCredentials(p.creds)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Terminate sends agentd SIGTERM and waits for it to exit, at most within: past that it
// kills agentd and says so. It returns nil when agentd exited with status 0, and an
// error otherwise, also when agentd had already exited or been terminated.
func (p *Process) Terminate(within time.Duration) error {
	p.mu.Lock()
	stopped := p.stopped
	p.stopped = true
	p.mu.Unlock()
	if stopped {
		return errors.New("agentd was terminated already")
	}
	select {
	case <-p.exited:
		return fmt.Errorf("agentd had exited (%s) before SIGTERM", p.exitStatus())
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		<-p.exited // Signal fails once the process is done
		return fmt.Errorf("agentd had exited (%s) before SIGTERM", p.exitStatus())
	}
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-p.exited:
		return p.waitErr
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("agentd still ran %s after SIGTERM: killed it", within)
	}
}

// Kill sends agentd SIGKILL, as a crash or an OOM kill would end it, and waits for it
// to exit: nothing of it runs its shutdown.
func (p *Process) Kill() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// exitStatus says how agentd exited; call it once exited is closed.
func (p *Process) exitStatus() string {
	if p.waitErr == nil {
		return "exit status 0"
	}
	return p.waitErr.Error()
}

// stop ends agentd unless Terminate did: SIGTERM, then SIGKILL after stopTimeout. How it
// exits is no test's concern here.
func (p *Process) stop() {
	p.mu.Lock()
	stopped := p.stopped
	p.mu.Unlock()
	if !stopped {
		_ = p.Terminate(stopTimeout)
	}
	<-p.exited
}

// FreeAddr returns a loopback address whose port was free a moment ago, for a listener
// of agentd's other than its gRPC one (--metrics-listen). Start finds agentd's own.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func freeAddr() (string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := lis.Addr().String()
	return addr, lis.Close()
}
