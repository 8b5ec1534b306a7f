package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// inheritedEnv are the variables of agentd's environment a server process inherits.
// Everything else (API keys, tokens) stays with agentd unless the config passes it on
// in ServerConfig.Env. The list is the one the reference MCP SDKs use, plus TMPDIR and
// LANG.
var inheritedEnv = []string{"HOME", "LANG", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "USER"}

const (
	// stopGrace is how long closing a server waits for its process to exit after its
	// standard input is closed, before it sends SIGTERM, and again before SIGKILL.
	stopGrace = 2 * time.Second
	// waitDelay bounds the wait for a process's output pipes once it has exited: a
	// child it left behind may hold them open.
	waitDelay = time.Second
)

// commandEnv returns the environment of a server process: the inherited variables of
// agentd's own environment, then cfg.Env, which wins.
func commandEnv(env map[string]string) []string {
	var out []string
	for _, k := range inheritedEnv {
		if _, set := env[k]; set {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

// commandTransport returns a transport that starts a new process of the server.
func (s *Source) commandTransport() *sdk.CommandTransport {
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	cmd.Env = commandEnv(s.cfg.Env)
	cmd.Dir = s.cfg.Dir
	cmd.Stderr = s.stderr
	cmd.WaitDelay = waitDelay
	return &sdk.CommandTransport{Command: cmd, TerminateDuration: stopGrace}
}

// httpTransport returns a transport for the server's streamable HTTP endpoint.
func (s *Source) httpTransport() *sdk.StreamableClientTransport {
	return &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: s.httpClient}
}

// newHTTPClient returns the client of one source: a transport of its own, so that Close
// can drop its idle connections, that adds the configured headers to every request.
func newHTTPClient(headers map[string]string) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	h := make(http.Header, len(headers))
	for k, v := range headers {
		h.Set(k, v)
	}
	return &http.Client{Transport: &headerTransport{base: base, header: h}}
}

type headerTransport struct {
	base   *http.Transport
	header http.Header
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.header) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.header {
			req.Header[k] = v
		}
	}
	return t.base.RoundTrip(req)
}

func (t *headerTransport) CloseIdleConnections() { t.base.CloseIdleConnections() }

// reservedHeaders are set by the transport itself; a config may not replace them.
var reservedHeaders = []string{"Accept", "Content-Length", "Content-Type", "Host", "Last-Event-Id"}

func checkHeader(name string) error {
	if name == "" || strings.ContainsFunc(name, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
	}) {
		return fmt.Errorf("header %q: not a valid header name", name)
	}
	canon := http.CanonicalHeaderKey(name)
	if slices.Contains(reservedHeaders, canon) || strings.HasPrefix(canon, "Mcp-") {
		return fmt.Errorf("header %q: set by the MCP transport itself", name)
	}
	return nil
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an http or https URL with a host")
	}
	return nil
}

// closingTransport remembers the connection its transport made, so that a failed
// handshake can close it (and so stop the process) whatever the SDK did about it.
type closingTransport struct {
	sdk.Transport
	mu   sync.Mutex
	conn sdk.Connection
}

func (t *closingTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	t.mu.Lock()
	t.conn = c
	t.mu.Unlock()
	return c, err
}

func (t *closingTransport) close() {
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// maxStderrTail bounds the end of a process's standard error that a source keeps to
// explain an exit.
const maxStderrTail = 512

// stderrLog logs a server process's standard error line by line and keeps its last
// line for the error that reports the process's exit. It is safe for concurrent use.
type stderrLog struct {
	log *slog.Logger

	mu   sync.Mutex
	buf  []byte // an unfinished line
	last string // the last complete, non-empty line
}

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxStderrTail {
		w.line(string(w.buf))
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

func (w *stderrLog) line(l string) {
	l = strings.TrimRight(l, "\r")
	if strings.TrimSpace(l) == "" {
		return
	}
	w.log.Debug("mcp server stderr", "line", l)
	w.last = truncate(l, maxStderrTail)
}

// take returns the last line written and forgets it, so that it explains one exit.
func (w *stderrLog) take() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.line(string(w.buf))
		w.buf = w.buf[:0]
	}
	l := w.last
	w.last = ""
	return l
}

// truncate cuts s to at most n bytes on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
