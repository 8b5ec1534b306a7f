package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// inflating returns gzip of n zero bytes: a small body that inflates to n.
func inflating(t testing.TB, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	z, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	zeros := make([]byte, 1<<20)
	for left := n; left > 0; left -= len(zeros) {
		if _, err := z.Write(zeros[:min(left, len(zeros))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// envelope frames msg as Connect, gRPC and gRPC-Web frame a message: a flags byte and a
// 4-byte length.
func envelope(flags byte, msg []byte) []byte {
	out := make([]byte, 5, 5+len(msg))
	out[0] = flags
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

// allocated returns the bytes the process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// post sends body to url with the headers (pairs) over c and returns the status and the
// answer's body and headers.
func post(t *testing.T, ctx context.Context, c *http.Client, url string, body []byte, headers ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for k, v := range resp.Trailer {
		resp.Header[k] = v
	}
	return resp.StatusCode, string(b), resp.Header
}

// A compressed body is inflated only as far as the message bound, in every protocol of
// the HTTP listener, with a token or without: a small body that inflates to 128 MiB is
// refused having cost agentd a few times the bound, never the whole of it. Without a
// token it is refused before any of it is read.
func TestHTTPInflatedBodiesAreBounded(t *testing.T) {
	srv, base := startServeHTTP(t, []string{"--demo-delay=0", "--auth-tokens-file", tokensFile(t), "--max-message-bytes", "1048576"}, slog.New(slog.DiscardHandler))
	bomb := inflating(t, 128<<20)
	unary := base + "/agentd.v1.AgentService/ExecuteRun"
	streaming := base + "/agentd.v1.AgentService/StartRun"
	for _, tc := range []struct {
		name    string
		url     string
		body    []byte
		headers []string
		refused []string // what the answer says, any of them
	}{
		{"plain JSON", unary, bomb, []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}, []string{`"code":8`}},
		{"Connect unary", unary, bomb, []string{"Content-Type", "application/json", "Connect-Protocol-Version", "1", "Content-Encoding", "gzip"}, []string{"resource_exhausted"}},
		{"Connect stream", streaming, envelope(1, bomb), []string{"Content-Type", "application/connect+json", "Connect-Content-Encoding", "gzip"}, []string{"resource_exhausted"}},
		{"gRPC-Web", streaming, envelope(1, bomb), []string{"Content-Type", "application/grpc-web+proto", "Grpc-Encoding", "gzip"}, []string{"Grpc-Status:8", "grpc-status: 8", "grpc-status:8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var status int
			var body string
			var header http.Header
			cost := allocated(func() {
				status, body, header = post(t, srv.ctx, http.DefaultClient, tc.url, tc.body, append([]string{"Authorization", "Bearer " + tokenA}, tc.headers...)...)
			})
			answer := body + headerText(header)
			if !containsAny(answer, tc.refused) {
				t.Errorf("with a token: %d %s, want RESOURCE_EXHAUSTED (%v)", status, answer, tc.refused)
			}
			if cost > 40<<20 {
				t.Errorf("with a token, the body cost %d MiB, want at most 40 MiB (it inflates to 128 MiB)", cost>>20)
			}
			cost = allocated(func() {
				status, body, header = post(t, srv.ctx, http.DefaultClient, tc.url, tc.body, tc.headers...)
			})
			answer = body + headerText(header)
			if !containsAny(answer, []string{"unauthenticated", `"code":16`, "Grpc-Status:16", "grpc-status: 16", "grpc-status:16"}) {
				t.Errorf("without a token: %d %s, want UNAUTHENTICATED", status, answer)
			}
			if cost > 8<<20 {
				t.Errorf("without a token, the body cost %d MiB, want at most 8 MiB: it is not to be read", cost>>20)
			}
		})
	}
}

// headerText renders h as Name:value lines, for matching.
func headerText(h http.Header) string {
	var sb strings.Builder
	for k, vs := range h {
		for _, v := range vs {
			sb.WriteString("\n" + k + ":" + v)
		}
	}
	return sb.String()
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// tinyParts returns a plain JSON ExecuteRun request of about n bytes whose message has
// very many tiny parts: JSON that costs many times its size as protobuf messages.
func tinyParts(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"start":{"messages":[{"role":"ROLE_USER","parts":[`)
	for b.Len() < n {
		b.WriteString(`{"text":"a"},`)
	}
	b.WriteString(`{"text":"a"}]}],"input":"hi"}}`)
	return b.Bytes()
}

// A call is refused on its headers when its token is missing or wrong, before its body
// is read or transcoded; with a token, a body past the bound is refused naming it.
func TestHTTPAuthBeforeTheBody(t *testing.T) {
	srv, base := startServeHTTP(t, []string{"--demo-delay=0", "--auth-tokens-file", tokensFile(t)}, slog.New(slog.DiscardHandler))
	url := base + "/agentd.v1.AgentService/ExecuteRun"
	big := tinyParts(15 << 20)
	for _, tc := range []struct {
		name    string
		headers []string
	}{
		{"no token", nil},
		{"a wrong token", []string{"Authorization", "Bearer " + wrongToken}},
	} {
		var status int
		var body string
		cost := allocated(func() {
			status, body, _ = post(t, srv.ctx, http.DefaultClient, url, big, append([]string{"Content-Type", "application/json"}, tc.headers...)...)
		})
		if status != http.StatusUnauthorized || !strings.Contains(body, `"code":16`) {
			t.Errorf("%s: %d %s, want 401 UNAUTHENTICATED as a google.rpc.Status", tc.name, status, body)
		}
		if cost > 16<<20 {
			t.Errorf("%s: a 15 MiB body cost %d MiB, want at most 16: it is not to be read", tc.name, cost>>20)
		}
	}
	status, body, _ := post(t, srv.ctx, http.DefaultClient, url, big, "Content-Type", "application/json", "Authorization", "Bearer "+tokenA)
	if status != http.StatusTooManyRequests || !strings.Contains(body, `"code":8`) || !strings.Contains(body, "larger than") {
		t.Errorf("with a token, 15 MiB: %d %.300s, want 429 RESOURCE_EXHAUSTED naming the bound", status, body)
	}
	// Health needs no token, on HTTP as on gRPC.
	if status, body, _ := post(t, srv.ctx, http.DefaultClient, base+"/grpc.health.v1.Health/Check", []byte(`{}`), "Content-Type", "application/json"); status != http.StatusOK {
		t.Errorf("Health/Check without a token: %d %s, want 200", status, body)
	}
}

// The messages the HTTP listener transcodes at once hold at most the gate's bytes: a
// call past it waits, and goes on when one before it is done.
func TestHTTPTranscodesAreBounded(t *testing.T) {
	const size = 1000
	b := &httpBodies{
		maxMessage:   2 * size,
		firstMessage: func(string) time.Duration { return time.Minute },
		needsToken:   func(string) bool { return false },
		gate:         semaphore.NewWeighted(2 * size),
	}
	entered := make(chan struct{})
	leave := make(chan struct{})
	h := b.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		entered <- struct{}{}
		<-leave
	}))
	body := bytes.Repeat([]byte("x"), size)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, "/agentd.v1.AgentService/ExecuteRun", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(&countingWriter{header: http.Header{}}, req)
		})
	}
	<-entered
	<-entered
	if b.gate.TryAcquire(1) {
		t.Fatal("two calls of the gate's size are being transcoded and the gate has room: want it full")
	}
	leave <- struct{}{} // one is done: the third goes on
	<-entered
	close(leave)
	wg.Wait()
	if !b.gate.TryAcquire(2 * size) {
		t.Error("every call ended, and the gate is not empty")
	}
}

// A stream holds at most one message's bound that gRPC has not taken: its body is read
// no further until gRPC takes one (received).
func TestHTTPStreamReadsAheadOneMessage(t *testing.T) {
	b := &httpBodies{
		maxMessage:   100,
		firstMessage: func(string) time.Duration { return time.Minute },
		gate:         semaphore.NewWeighted(1000),
	}
	call := &httpCall{bodies: b, rc: http.NewResponseController(&countingWriter{header: http.Header{}}), ctx: t.Context()}
	var src bytes.Buffer
	for range 3 {
		src.Write(envelope(0, bytes.Repeat([]byte("m"), 60)))
	}
	e := &envelopeReader{call: call, src: io.NopCloser(&src)}
	buf := make([]byte, 65)
	if _, err := io.ReadFull(e, buf); err != nil { // the first message
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(e, buf) // the second must wait: 60 + 60 > 100
		read <- err
	}()
	for waiting := false; !waiting; {
		select {
		case err := <-read:
			t.Fatalf("the second message was read (%v) before gRPC took the first", err)
		default:
		}
		call.mu.Lock()
		waiting = call.room != nil
		call.mu.Unlock()
		runtime.Gosched()
	}
	call.received()
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	call.received()
	call.done()
}

// stall opens a call to url whose body is its headers and part of a message, and then
// nothing; it returns what the server answered, or an error once ctx is done.
func stall(ctx context.Context, c *http.Client, url string, part []byte, headers ...string) (*http.Response, error) {
	pr, pw := io.Pipe()
	go func() {
		pw.Write(part)
		<-ctx.Done()
		pw.Close()
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, pr)
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// A call whose first message does not arrive whole within --start-timeout of its
// headers is ended, before auth and on both listeners: it holds no stream or connection
// for longer than that.
func TestStalledFirstMessageEndsTheCall(t *testing.T) {
	srv, base := startServeHTTP(t, []string{"--demo-delay=0", "--start-timeout=1s", "--auth-tokens-file", tokensFile(t)}, slog.New(slog.DiscardHandler))
	partial := envelope(0, bytes.Repeat([]byte("x"), 100))[:40]
	grpcStatus := func(resp *http.Response) string {
		return resp.Header.Get("Grpc-Status") + resp.Trailer.Get("Grpc-Status")
	}
	for _, tc := range []struct {
		name    string
		client  *http.Client
		url     string
		headers []string
		check   func(*http.Response) bool
	}{
		{"gRPC listener, unary", h2cClient(), "http://" + srv.addr + "/agentd.v1.AgentService/ExecuteRun",
			[]string{"Content-Type", "application/grpc", "Te", "trailers"},
			func(r *http.Response) bool { return grpcStatus(r) == "4" }},
		{"gRPC listener, server stream", h2cClient(), "http://" + srv.addr + "/agentd.v1.AgentService/StartRun",
			[]string{"Content-Type", "application/grpc", "Te", "trailers", "Authorization", "Bearer " + tokenA},
			func(r *http.Response) bool { return grpcStatus(r) == "4" }},
		{"HTTP listener, plain JSON", http.DefaultClient, base + "/agentd.v1.AgentService/ExecuteRun",
			[]string{"Content-Type", "application/json", "Authorization", "Bearer " + tokenA},
			func(r *http.Response) bool { return r.StatusCode == http.StatusGatewayTimeout }},
		{"HTTP listener, Connect stream", h2cClient(), base + "/agentd.v1.AgentService/StartRun",
			[]string{"Content-Type", "application/connect+json", "Authorization", "Bearer " + tokenA},
			func(*http.Response) bool { return true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(srv.ctx, 20*time.Second)
			defer cancel()
			body := partial
			if strings.Contains(tc.headers[1], "json") && !strings.Contains(tc.headers[1], "connect") {
				body = []byte(`{"start":{"inp`)
			}
			resp, err := stall(ctx, tc.client, tc.url, body, tc.headers...)
			switch {
			case ctx.Err() != nil:
				t.Fatalf("the call is still open after 20 s (%v), want it ended after --start-timeout=1s", err)
			case err == nil && !tc.check(resp):
				t.Errorf("the call ended %s (grpc-status %q), want it ended for its stalled message", resp.Status, grpcStatus(resp))
			}
		})
	}
}

// --max-connections-per-ip closes a connection from an address that has that many open,
// and leaves other addresses alone.
func TestConnectionLimitPerIP(t *testing.T) {
	lis := listenLoopback(t)
	serveHealth(t, []string{"--max-connections-per-ip=1"}, lis)
	addr := lis.Addr().String()
	check := func(conn *grpc.ClientConn) error {
		_, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
		return err
	}
	first := dial(t, addr, nil)
	if err := check(first); err != nil {
		t.Fatal(err)
	}
	if err := check(dial(t, addr, nil)); status.Code(err) != codes.Unavailable {
		t.Errorf("a second connection from 127.0.0.1: %v, want UNAVAILABLE", err)
	}
	if err := check(dialFrom(t, addr, secondLoopback)); err != nil {
		t.Errorf("a connection from %s: %v, want it served", secondLoopback, err)
	}
}
