package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/runtime"
)

// ServerConfig names one MCP server and says how to reach it. Exactly one of Command
// and URL is set. It is the operator's config: nothing a client sends may fill it in,
// since it starts processes and reaches hosts.
type ServerConfig struct {
	// Name identifies the server: in logs, in errors, in [Origin], and as the prefix of
	// namespaced tool names. It matches ^[A-Za-z0-9_-]{1,64}$.
	Name string

	// Command starts the server as a process that speaks MCP over its standard input and
	// output (the stdio transport). It is looked up in agentd's PATH.
	Command string
	// Args are the command's arguments.
	Args []string
	// Env is added to the process's environment, which otherwise holds only HOME, LANG,
	// LOGNAME, PATH, SHELL, TERM, TMPDIR and USER from agentd's own: secrets in agentd's
	// environment reach a server only when Env names them.
	Env map[string]string
	// Dir is the process's working directory; empty means agentd's.
	Dir string

	// URL is the endpoint of a server that speaks MCP's streamable HTTP transport.
	URL string
	// Headers are added to every HTTP request, for example an Authorization header.
	// The transport's own headers (Accept, Content-Type, Mcp-*) cannot be replaced.
	Headers map[string]string

	// Timeout bounds one call of one of the server's tools, and becomes their
	// [runtime.ToolSpec.Timeout]. Zero leaves calls to the agent's tool timeout.
	Timeout time.Duration
	// Approval, when set, is the approval of every tool of the server, whatever its
	// annotations say (see [Source.Policy]).
	Approval *runtime.Approval
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Check reports what is wrong with the config, if anything, without starting or
// reaching the server; [Connect] checks it too. A service can check its config file
// with it when it loads it.
func (c ServerConfig) Check() error {
	return c.check(false)
}

func (c ServerConfig) check(dialer bool) error {
	var errs []error
	if !nameRE.MatchString(c.Name) {
		errs = append(errs, fmt.Errorf("name %q: want 1 to 64 letters, digits, '_' or '-'", c.Name))
	}
	switch {
	case dialer && (c.Command != "" || c.URL != ""):
		errs = append(errs, errors.New("command or url set along with WithTransport"))
	case dialer:
	case c.Command != "" && c.URL != "":
		errs = append(errs, errors.New("both command and url set; want one"))
	case c.Command == "" && c.URL == "":
		errs = append(errs, errors.New("neither command nor url set; want one"))
	}
	if c.Command == "" && (len(c.Args) > 0 || len(c.Env) > 0 || c.Dir != "") {
		errs = append(errs, errors.New("args, env and dir need a command"))
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			errs = append(errs, fmt.Errorf("env %q: not a valid variable name", k))
		}
	}
	if c.URL != "" {
		if err := checkURL(c.URL); err != nil {
			errs = append(errs, fmt.Errorf("url %q: %w", c.URL, err))
		}
	}
	if c.URL == "" && len(c.Headers) > 0 {
		errs = append(errs, errors.New("headers need a url"))
	}
	for k := range c.Headers {
		if err := checkHeader(k); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v: must not be negative", c.Timeout))
	}
	if c.Approval != nil && *c.Approval > runtime.ApprovalAlways {
		errs = append(errs, fmt.Errorf("approval %d: unknown", *c.Approval))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("mcp server %q: %w", c.Name, err)
	}
	return nil
}

// ErrUnavailable is wrapped by the errors of calls made while a server is not connected:
// while its process restarts after an exit, or while a lost HTTP session is
// reestablished.
var ErrUnavailable = errors.New("mcp: server unavailable")

// ErrClosed is wrapped by the errors of calls made after [Source.Close].
var ErrClosed = errors.New("mcp: source closed")

// connectTimeout bounds one reconnection: starting the process (or reaching the URL),
// the handshake and the listing of tools. The first connection is bounded by the
// context given to [Connect] instead.
const connectTimeout = time.Minute

// stableAfter is how long a session must have lasted for the next reconnection to start
// again from the shortest delay, rather than from twice the last one.
const stableAfter = time.Minute

// Source is a connection to one MCP server, and the tools it offers. [Connect] makes
// one; [Source.Close] ends it.
//
// The source lists the server's tools when it connects and again whenever the server
// says that its list changed. When the session ends without Close (the process exited,
// the HTTP session was lost), the source reconnects with a bounded exponential backoff
// (see [WithBackoff]), starting a new process for a stdio server, and lists the tools
// again; calls made meanwhile fail with an error wrapping [ErrUnavailable]. The tools it
// last listed stay offered meanwhile.
//
// A Source is safe for concurrent use. Its tools may be called concurrently.
type Source struct {
	cfg        ServerConfig
	o          options
	client     *sdk.Client
	log        *slog.Logger
	stderr     *stderrLog
	httpClient *http.Client

	refresh chan struct{} // a tool list change to act on; capacity 1
	// life is cancelled by Close. It ends the calls in flight, which the session's
	// graceful close would otherwise wait for, and the goroutine run.
	life   context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	mu        sync.Mutex
	session   *sdk.ClientSession // nil while not connected
	err       error              // why not connected
	tools     []remoteTool       // as last listed
	closed    bool
	listeners []func()
}

// Connect starts or reaches the server cfg names, completes the MCP handshake and lists
// its tools. ctx bounds only that; the connection lasts until [Source.Close]. A server
// that cannot be started, reached or listed is an error, with nothing left running.
func Connect(ctx context.Context, cfg ServerConfig, opts ...Option) (*Source, error) {
	o := newOptions(opts)
	if err := cfg.check(o.dial != nil); err != nil {
		return nil, err
	}
	s := &Source{
		cfg:     cfg,
		o:       o,
		log:     o.logger.With("mcp_server", cfg.Name),
		refresh: make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	s.stderr = &stderrLog{log: s.log}
	if cfg.URL != "" {
		s.httpClient = newHTTPClient(cfg.Headers)
	}
	s.client = sdk.NewClient(&sdk.Implementation{Name: "agentd", Version: version()}, &sdk.ClientOptions{
		// agentd serves no roots, sampling or elicitation.
		Capabilities:           &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { s.toolsChanged() },
	})
	cs, tools, err := s.connect(ctx)
	if err != nil {
		s.closeIdle()
		return nil, fmt.Errorf("mcp server %q: %w", cfg.Name, err)
	}
	s.session, s.tools = cs, tools
	s.life, s.cancel = context.WithCancel(context.Background())
	go s.run(s.life, cs)
	return s, nil
}

// Name returns the server's name, ServerConfig.Name.
func (s *Source) Name() string { return s.cfg.Name }

// Err returns nil while the server is connected, and otherwise why it is not: the end of
// its last session, or the failure of the last attempt to reconnect. After Close it
// returns an error wrapping [ErrClosed].
func (s *Source) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unavailable()
}

// unavailable returns the error of a call made now, or nil. s.mu is held.
func (s *Source) unavailable() error {
	switch {
	case s.closed:
		return fmt.Errorf("%w: server %q", ErrClosed, s.cfg.Name)
	case s.session == nil:
		return fmt.Errorf("%w: server %q is reconnecting after: %v", ErrUnavailable, s.cfg.Name, s.err)
	}
	return nil
}

// OnToolsChanged registers f to be called after the source's tools changed: after the
// server said its list changed and the new list differs, or after a reconnection found a
// different list. f runs on the source's own goroutine, one call at a time; it must not
// block for long nor call [Source.Close]. Read the new tools with [Source.Tools] or
// [Merge].
func (s *Source) OnToolsChanged(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listeners = append(s.listeners, f)
}

// Close ends the session and waits for the source's goroutine. Calls still running fail
// with an error wrapping [ErrClosed]. A stdio server's standard input is closed, and a
// process that has not exited 2s later is sent SIGTERM, and after 2s more SIGKILL;
// Close returns when it has exited. How it exited is logged, not returned: Close always
// returns nil. Close is idempotent.
func (s *Source) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	<-s.done
	s.closeIdle()
	return nil
}

func (s *Source) closeIdle() {
	if s.httpClient != nil {
		s.httpClient.CloseIdleConnections()
	}
}

// toolsChanged notes a tools/list_changed notification for run, without blocking the
// session's reading of messages.
func (s *Source) toolsChanged() {
	select {
	case s.refresh <- struct{}{}:
	default:
	}
}

// connect makes one session and lists its tools. On failure nothing is left running.
func (s *Source) connect(ctx context.Context) (*sdk.ClientSession, []remoteTool, error) {
	var t sdk.Transport
	switch {
	case s.o.dial != nil:
		var err error
		if t, err = s.o.dial(ctx); err != nil {
			return nil, nil, err
		}
	case s.cfg.Command != "":
		t = s.commandTransport()
	default:
		t = s.httpTransport()
	}
	ct := &closingTransport{Transport: t}
	cs, err := s.client.Connect(ctx, ct, nil)
	if err != nil {
		ct.close()
		return nil, nil, s.explain(fmt.Errorf("connect: %w", err))
	}
	tools, err := listTools(ctx, cs)
	if err != nil {
		_ = cs.Close()
		return nil, nil, s.explain(err)
	}
	return cs, s.toRemote(tools), nil
}

// explain adds the last line the process wrote to its standard error, if any.
func (s *Source) explain(err error) error {
	if l := s.stderr.take(); l != "" {
		return fmt.Errorf("%w (stderr: %s)", err, l)
	}
	return err
}

// listTools lists all the server's tools, following pages. The list is never nil.
func listTools(ctx context.Context, cs *sdk.ClientSession) ([]*sdk.Tool, error) {
	tools := []*sdk.Tool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// run owns the session: it relists tools when told to, and reconnects when the session
// ends, until ctx is cancelled by Close.
func (s *Source) run(ctx context.Context, cs *sdk.ClientSession) {
	defer close(s.done)
	delay := s.o.minBackoff
	for {
		started := time.Now()
		ended := make(chan error, 1)
		go func() { ended <- cs.Wait() }()
		var err error
	session:
		for {
			select {
			case <-ctx.Done():
				if err := cs.Close(); err != nil {
					s.log.Debug("mcp server closed", "error", err)
				}
				<-ended
				s.setSession(nil, nil, nil)
				return
			case <-s.refresh:
				s.relist(ctx, cs)
			case err = <-ended:
				break session
			}
		}
		// Closing reaps the process; the session is over either way.
		_ = cs.Close()
		if err == nil {
			err = errors.New("the server closed the session")
		}
		if s.cfg.Command != "" {
			err = fmt.Errorf("the server process exited: %w", err)
		}
		err = s.explain(err)
		s.setSession(nil, nil, err)
		if time.Since(started) >= stableAfter {
			delay = s.o.minBackoff
		}
		s.log.Warn("mcp server disconnected; reconnecting", "error", err, "delay", delay)
		if cs, delay = s.reconnect(ctx, delay); cs == nil {
			return
		}
	}
}

// reconnect tries to connect until it succeeds or ctx is done, waiting delay before the
// first attempt and doubling it, up to the maximum, after each. It returns the session
// (nil when ctx is done) and the delay for the next reconnection.
func (s *Source) reconnect(ctx context.Context, delay time.Duration) (*sdk.ClientSession, time.Duration) {
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, delay
		case <-timer.C:
		}
		delay = min(2*delay, s.o.maxBackoff)
		cctx, cancel := context.WithTimeout(ctx, connectTimeout)
		cs, tools, err := s.connect(cctx)
		cancel()
		if err == nil {
			s.setSession(cs, tools, nil)
			s.log.Info("mcp server reconnected", "tools", len(tools))
			return cs, delay
		}
		if ctx.Err() != nil {
			return nil, delay
		}
		s.setSession(nil, nil, err)
		s.log.Warn("mcp server reconnection failed", "error", err, "next_delay", delay)
		timer.Reset(delay)
	}
}

// relist lists the tools again after the server said they changed.
func (s *Source) relist(ctx context.Context, cs *sdk.ClientSession) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	tools, err := listTools(ctx, cs)
	if err != nil {
		// The session is probably ending; run notices and reconnects, which lists.
		s.log.Warn("mcp server tools could not be listed again", "error", err)
		return
	}
	s.setSession(cs, s.toRemote(tools), nil)
}

// setSession records the state of the connection: a session and its tools, or none and
// why. A nil tools list keeps the tools listed before. It calls the listeners when the
// tools changed.
func (s *Source) setSession(cs *sdk.ClientSession, tools []remoteTool, err error) {
	s.mu.Lock()
	s.session, s.err = cs, err
	changed := tools != nil && !slices.EqualFunc(s.tools, tools, remoteTool.equal)
	if tools != nil {
		s.tools = tools
	}
	listeners := slices.Clone(s.listeners)
	closed := s.closed
	s.mu.Unlock()
	if changed && !closed {
		for _, f := range listeners {
			f()
		}
	}
}

// current returns the session to call, or why there is none.
func (s *Source) current() (*sdk.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unavailable(); err != nil {
		return nil, err
	}
	return s.session, nil
}

// snapshot returns the tools as last listed.
func (s *Source) snapshot() []remoteTool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}
