package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/agentdtest"
	"github.com/agentd/agentd/internal/logtest"
)

// startServeHTTP is startServe with the HTTP listener on a loopback port as well; it
// returns once that port answers, with the listener's base URL ("http://127.0.0.1:port").
func startServeHTTP(t testing.TB, args []string, log *slog.Logger) (*served, string) {
	t.Helper()
	addr := agentdtest.FreeAddr(t)
	srv := startServe(t, append([]string{"--http-listen", addr}, args...), log)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return srv, "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("the HTTP listener on %s does not answer: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// postJSON POSTs body to url as plain JSON, as curl would, with headers, and returns the
// status and the body of the answer.
func postJSON(t *testing.T, ctx context.Context, url, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// A plain JSON POST calls a unary RPC, and a bad request is the client's error, named.
func TestHTTPPlainJSON(t *testing.T) {
	srv, base := startServeHTTP(t, []string{"--demo-delay=0"}, slog.New(slog.DiscardHandler))
	ctx := srv.ctx

	status, body := postJSON(t, ctx, base+"/agentd.v1.AgentService/ExecuteRun", `{"start":{"input":"what is 2+2?"}}`)
	var out struct {
		RunID  string `json:"runId"`
		Result struct {
			Reason    string `json:"reason"`
			FinalText string `json:"finalText"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || status != http.StatusOK {
		t.Fatalf("ExecuteRun: %d %s (%v), want 200 and its response as JSON", status, body, err)
	}
	if out.Result.FinalText != "2+2 = 4" || out.Result.Reason != "RUN_END_REASON_COMPLETED" || !strings.HasPrefix(out.RunID, "run_") {
		t.Errorf("ExecuteRun answered %s, want a completed run answering 2+2 = 4", body)
	}

	for _, tc := range []struct{ name, body, want string }{
		{"unknown field", `{"start":{"inptu":"x"}}`, `unknown field \"inptu\"`},
		{"not JSON", `{"start":`, "invalid JSON request"},
		{"no input", `{"start":{}}`, "input"},
	} {
		status, body := postJSON(t, ctx, base+"/agentd.v1.AgentService/ExecuteRun", tc.body)
		if status != http.StatusBadRequest || !strings.Contains(body, `"code":"invalid_argument"`) && !strings.Contains(body, `"code":3`) || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want 400 INVALID_ARGUMENT naming %s", tc.name, status, body, tc.want)
		}
	}

	status, body = postJSON(t, ctx, base+"/agentd.v1.AgentService/NoSuchMethod", `{}`)
	if status == http.StatusOK {
		t.Errorf("an unknown method: %d %s, want an error", status, body)
	}

	// Health is a unary RPC like any other.
	status, body = postJSON(t, ctx, base+"/grpc.health.v1.Health/Check", `{}`)
	if status != http.StatusOK || !strings.Contains(body, "SERVING") {
		t.Errorf("Health/Check: %d %s, want SERVING", status, body)
	}
	if err := srv.stop(); err != nil {
		t.Errorf("serve returned %v after shutdown, want nil", err)
	}
}

// runEvents reads a StartRun stream to its end and returns its events.
func runEvents(t *testing.T, stream *connect.ServerStreamForClient[agentdv1.StartRunResponse]) []*agentdv1.RunEvent {
	t.Helper()
	var events []*agentdv1.RunEvent
	for stream.Receive() {
		events = append(events, stream.Msg().GetEvent())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("the stream ended with %v", err)
	}
	return events
}

// StartRun, a server stream, works over the Connect protocol (JSON and protobuf) and
// gRPC-Web, over HTTP/1.1: what browsers use.
func TestHTTPServerStreamingProtocols(t *testing.T) {
	srv, base := startServeHTTP(t, []string{"--demo-delay=0"}, slog.New(slog.DiscardHandler))
	for name, opts := range map[string][]connect.ClientOption{
		"connect+json":  {connect.WithProtoJSON()},
		"connect+proto": nil,
		"grpc-web":      {connect.WithGRPCWeb()},
	} {
		t.Run(name, func(t *testing.T) {
			client := connect.NewClient[agentdv1.StartRunRequest, agentdv1.StartRunResponse](http.DefaultClient, base+"/agentd.v1.AgentService/StartRun", opts...)
			stream, err := client.CallServerStream(srv.ctx, connect.NewRequest(&agentdv1.StartRunRequest{Start: &agentdv1.RunSpec{Input: "what is 12*7?"}}))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			events := runEvents(t, stream)
			if len(events) < 3 || events[0].GetRunStarted() == nil {
				t.Fatalf("%d events, want run_started first and run_finished last: %v", len(events), events)
			}
			var deltas strings.Builder
			for _, ev := range events {
				deltas.WriteString(ev.GetTextDelta().GetDelta())
			}
			fin := events[len(events)-1].GetRunFinished()
			if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || fin.GetFinalText() != "12*7 = 84" || deltas.String() != "12*7 = 84" {
				t.Errorf("the run ended %v with %q (deltas %q), want COMPLETED with 12*7 = 84", fin.GetReason(), fin.GetFinalText(), deltas.String())
			}
		})
	}
}

// h2cClient is an HTTP client that speaks HTTP/2 without TLS, as a gRPC or Connect client
// of a plaintext agentd does for Run.
func h2cClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}

// Run, the bidirectional stream, works over HTTP/2 (h2c here) in the Connect and gRPC
// protocols: an approval is asked and answered on the same stream.
func TestHTTPRunBidiOverHTTP2(t *testing.T) {
	srv, base := startServeHTTP(t, []string{"--demo-delay=0"}, slog.New(slog.DiscardHandler))
	for name, opts := range map[string][]connect.ClientOption{
		"connect": {connect.WithProtoJSON()},
		"grpc":    {connect.WithGRPC()},
	} {
		t.Run(name, func(t *testing.T) {
			client := connect.NewClient[agentdv1.RunRequest, agentdv1.RunResponse](h2cClient(), base+"/agentd.v1.AgentService/Run", opts...)
			stream := client.CallBidiStream(srv.ctx)
			defer stream.CloseResponse()
			if err := stream.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: &agentdv1.RunSpec{Input: "save a note: buy milk"}}}); err != nil {
				t.Fatal(err)
			}
			var fin *agentdv1.RunFinished
			var asked int
			for fin == nil {
				resp, err := stream.Receive()
				if err != nil {
					t.Fatalf("Receive: %v (asked %d approvals)", err, asked)
				}
				ev := resp.GetEvent()
				if ar := ev.GetApprovalRequested(); ar != nil {
					asked++
					if err := stream.Send(&agentdv1.RunRequest{ClientSeq: 2, Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
						ApprovalId: ar.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
					}}}); err != nil {
						t.Fatal(err)
					}
				}
				fin = ev.GetRunFinished()
			}
			if err := stream.CloseRequest(); err != nil {
				t.Fatal(err)
			}
			if asked != 1 || fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || !strings.Contains(fin.GetFinalText(), "Buy milk") {
				t.Errorf("asked %d approvals; the run ended %v with %q; want 1, and COMPLETED having saved Buy milk", asked, fin.GetReason(), fin.GetFinalText())
			}
		})
	}
	// Over HTTP/1.1 a bidi stream is refused, with a status that says why.
	req, _ := http.NewRequestWithContext(srv.ctx, http.MethodPost, base+"/agentd.v1.AgentService/Run", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/connect+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusHTTPVersionNotSupported {
		t.Errorf("Run over HTTP/1.1: %s, want 505 HTTP Version Not Supported", resp.Status)
	}
}

// The gRPC listener's interceptors apply to HTTP calls: a call without a token is refused,
// and the hooks (here --audit's) see the runs of HTTP calls.
func TestHTTPCallsPassTheInterceptors(t *testing.T) {
	var logs logtest.Buffer
	srv, base := startServeHTTP(t, []string{"--demo-delay=0", "--auth-tokens-file", tokensFile(t), "--audit"}, slog.New(slog.NewJSONHandler(&logs, nil)))
	url := base + "/agentd.v1.AgentService/ExecuteRun"
	status, body := postJSON(t, srv.ctx, url, `{"start":{"input":"what is 2+2?"}}`)
	if status != http.StatusUnauthorized || !strings.Contains(body, "unauthenticated") && !strings.Contains(body, `"code":16`) {
		t.Errorf("without a token: %d %s, want 401 UNAUTHENTICATED", status, body)
	}
	status, body = postJSON(t, srv.ctx, url, `{"start":{"input":"what is 2+2?"}}`, "Authorization", "Bearer "+wrongToken)
	if status != http.StatusUnauthorized {
		t.Errorf("with a wrong token: %d %s, want 401", status, body)
	}
	status, body = postJSON(t, srv.ctx, url, `{"start":{"input":"what is 2+2?"}}`, "Authorization", "Bearer "+tokenA)
	if status != http.StatusOK || !strings.Contains(body, "2+2 = 4") {
		t.Fatalf("with a token: %d %s, want the answer", status, body)
	}
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	var calls int
	for _, rec := range logs.Records(t) {
		if rec["msg"] == "tool call" && rec["tool"] == "calculate" {
			calls++
		}
	}
	if calls != 1 {
		t.Errorf("%d audit records of the HTTP run's tool call, want 1:\n%s", calls, logs.String())
	}
	if strings.Contains(logs.String(), tokenA) || strings.Contains(logs.String(), wrongToken) {
		t.Error("the log shows a token")
	}
}

// CORS is closed by default: no origin gets an Access-Control-Allow-Origin; with
// --http-cors-origins the named origins do, for the headers a Connect client sends.
func TestHTTPCORS(t *testing.T) {
	preflight := func(t *testing.T, ctx context.Context, base, origin string) http.Header {
		req, _ := http.NewRequestWithContext(ctx, http.MethodOptions, base+"/agentd.v1.AgentService/ListAgents", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization,connect-protocol-version,content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header
	}
	t.Run("closed by default", func(t *testing.T) {
		srv, base := startServeHTTP(t, nil, slog.New(slog.DiscardHandler))
		if h := preflight(t, srv.ctx, base, "https://elsewhere.example"); h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight answered %v, want no CORS headers", h)
		}
	})
	t.Run("configured origins", func(t *testing.T) {
		srv, base := startServeHTTP(t, []string{"--http-cors-origins", "https://console.example.com, https://other.example"}, slog.New(slog.DiscardHandler))
		h := preflight(t, srv.ctx, base, "https://console.example.com")
		if h.Get("Access-Control-Allow-Origin") != "https://console.example.com" || !strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "authorization") {
			t.Errorf("preflight from a configured origin answered %v, want it allowed, authorization too", h)
		}
		if h := preflight(t, srv.ctx, base, "https://elsewhere.example"); h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from another origin answered %v, want no CORS headers", h)
		}
	})
}

func TestHTTPConfig(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http-cors-origins", "https://a.example"}, "--http-cors-origins needs --http-listen"},
		{[]string{"--http-listen", "localhost:0", "--http-cors-origins", "a.example"}, `"a.example" is not an origin`},
	} {
		_, err := parseConfig(tc.args, env(nil), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseConfig(%q) = %v, want an error saying %s", tc.args, err, tc.want)
		}
	}
	cfg, err := parseConfig([]string{"--http-listen", "localhost:0", "--http-cors-origins", "*"}, env(nil), io.Discard)
	if err != nil || cfg.httpListen != "localhost:0" {
		t.Errorf("parseConfig = %+v, %v; want the HTTP listener on localhost:0 open to any origin", cfg.httpListen, err)
	}
}

// The console is served at / and at any path that is neither a file of it nor an RPC,
// with headers that keep it from loading anything from elsewhere.
func TestHTTPServesTheConsole(t *testing.T) {
	srv, base := startServeHTTP(t, nil, slog.New(slog.DiscardHandler))
	for _, path := range []string{"/", "/runs/run_123"} {
		req, _ := http.NewRequestWithContext(srv.ctx, http.MethodGet, base+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "<html") || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("GET %s: %s %v\n%.200s\nwant the console's page with its CSP", path, resp.Status, resp.Header, b)
		}
	}
}

// With --tls-cert the HTTP listener serves TLS, and Run works over HTTP/2 negotiated by
// ALPN.
func TestHTTPOverTLS(t *testing.T) {
	pki := newTestPKI(t)
	addr := agentdtest.FreeAddr(t)
	srv := startServe(t, []string{"--demo-delay=0", "--http-listen", addr, "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey}, slog.New(slog.DiscardHandler))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool, ServerName: "localhost"}, ForceAttemptHTTP2: true}}
	client := connect.NewClient[agentdv1.RunRequest, agentdv1.RunResponse](hc, "https://"+addr+"/agentd.v1.AgentService/Run", connect.WithGRPC())
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = askOverRun(srv.ctx, client); err == nil || !errors.Is(err, errNotListening) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

var errNotListening = errors.New("not listening yet")

// askOverRun runs "what is 2+2?" on a Run stream and checks the answer.
func askOverRun(ctx context.Context, client *connect.Client[agentdv1.RunRequest, agentdv1.RunResponse]) error {
	stream := client.CallBidiStream(ctx)
	defer stream.CloseResponse()
	if err := stream.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: &agentdv1.RunSpec{Input: "what is 2+2?"}}}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	for {
		resp, err := stream.Receive()
		if connect.CodeOf(err) == connect.CodeUnavailable && strings.Contains(err.Error(), "connection refused") {
			return errNotListening
		}
		if err != nil {
			return err
		}
		if fin := resp.GetEvent().GetRunFinished(); fin != nil {
			if fin.GetFinalText() != "2+2 = 4" {
				return fmt.Errorf("the run answered %q, want 2+2 = 4", fin.GetFinalText())
			}
			return stream.CloseRequest()
		}
	}
}

// Shutdown ends the HTTP listener's streams too: a run waiting on an approval ends
// AWAITING_INPUT with the continuation to resume it by, a health Watch is closed (at the
// shutdown timeout, as on the gRPC listener), and serve returns.
func TestHTTPShutdownEndsItsStreams(t *testing.T) {
	srv, base := startServeHTTP(t, []string{"--demo-delay=0", "--park-after=1m"}, slog.New(slog.DiscardHandler))
	ctx := context.WithoutCancel(srv.ctx)
	watch := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](http.DefaultClient, base+"/grpc.health.v1.Health/Watch")
	ws, err := watch.CallServerStream(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if !ws.Receive() || ws.Msg().GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: %v %v, want SERVING", ws.Msg(), ws.Err())
	}
	start := connect.NewClient[agentdv1.StartRunRequest, agentdv1.StartRunResponse](http.DefaultClient, base+"/agentd.v1.AgentService/StartRun")
	rs, err := start.CallServerStream(ctx, connect.NewRequest(&agentdv1.StartRunRequest{Start: &agentdv1.RunSpec{Input: "save a note: buy milk"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for rs.Receive() && rs.Msg().GetEvent().GetApprovalRequested() == nil {
	}
	if rs.Err() != nil {
		t.Fatal(rs.Err())
	}

	stopped := make(chan error, 1)
	go func() { stopped <- srv.stop() }()
	var fin *agentdv1.RunFinished
	for rs.Receive() {
		if f := rs.Msg().GetEvent().GetRunFinished(); f != nil {
			fin = f
		}
	}
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT || len(fin.GetContinuation()) == 0 {
		t.Errorf("the waiting run ended %v (continuation %d bytes; stream %v), want AWAITING_INPUT with a continuation", fin.GetReason(), len(fin.GetContinuation()), rs.Err())
	}
	for ws.Receive() {
	}
	if err := <-stopped; err != nil {
		t.Errorf("serve returned %v, want nil", err)
	}
}

// countingWriter is a ResponseWriter that counts its flushes and what they carried.
type countingWriter struct {
	mu               sync.Mutex
	header           http.Header
	written, flushed int // bytes
	flushes          int
}

func (w *countingWriter) Header() http.Header { return w.header }
func (w *countingWriter) WriteHeader(int)     {}
func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.written += len(p)
	return len(p), nil
}
func (w *countingWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushes++
	w.flushed = w.written
}
func (w *countingWriter) state() (flushes, unflushed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushes, w.written - w.flushed
}

// The HTTP listener batches a burst's flushes into few, and leaves nothing unflushed: a
// message alone is flushed by the timer while the handler waits, and a flush still waiting
// as the handler returns is carried out then.
func TestHTTPBatchesFlushes(t *testing.T) {
	cw := &countingWriter{header: http.Header{}}
	next, returned := make(chan struct{}), make(chan struct{})
	h := batchFlushes(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 1000 {
			w.Write([]byte("delta"))
			w.(http.Flusher).Flush()
		}
		<-next
		w.Write([]byte("alone"))
		w.(http.Flusher).Flush()
		<-next
		w.Write([]byte("last"))
		w.(http.Flusher).Flush() // and returns at once: its flush is still waiting
	}), time.Millisecond)
	go func() {
		h.ServeHTTP(cw, httptest.NewRequest(http.MethodPost, "/", nil))
		close(returned)
	}()
	waitFlushed := func(what string) int {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if n, unflushed := cw.state(); unflushed == 0 && n > 0 {
				return n
			}
		}
		n, unflushed := cw.state()
		t.Fatalf("%s: %d bytes still unflushed after %d flushes", what, unflushed, n)
		return 0
	}
	n := waitFlushed("a burst") // the handler waits on next
	if n >= 1000 {
		t.Errorf("1000 messages written at once took %d flushes, want them batched", n)
	}
	next <- struct{}{}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if n2, unflushed := cw.state(); n2 > n && unflushed == 0 {
			break // the lone message, flushed by the timer: the handler still waits
		}
		if time.Now().After(deadline) {
			t.Fatal("a message alone was not flushed while the handler waited")
		}
	}
	next <- struct{}{}
	<-returned
	if _, unflushed := cw.state(); unflushed != 0 {
		t.Errorf("%d bytes unflushed when the handler returned", unflushed)
	}
}

// Over HTTP/2 a flush reads the response's trailers while the handler may be setting
// them, as gRPC and vanguard do as a response ends: the batching writer keeps the two
// apart (under -race this fails if they touch one map), and the trailers arrive.
func TestHTTPBatchedFlushesKeepTrailers(t *testing.T) {
	srv := httptest.NewUnstartedServer(batchFlushes(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Last")
		w.WriteHeader(http.StatusOK)
		for i := range 300 {
			w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			w.Header().Set("X-Last", strconv.Itoa(i))
		}
	}), time.Microsecond))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 || len(b) != 300 || resp.Trailer.Get("X-Last") != "299" {
		t.Errorf("HTTP/%d, %d bytes, trailer X-Last %q; want HTTP/2, 300 bytes and 299", resp.ProtoMajor, len(b), resp.Trailer.Get("X-Last"))
	}
}

// What a page of another site can make a browser send without a CORS preflight is
// refused: a POST of no, form or text content type, a request from another origin, and,
// on a loopback listener without auth, a request for another host name (DNS rebinding).
func TestHTTPRefusesWhatOtherSitesCanSend(t *testing.T) {
	srv, base := startServeHTTP(t, []string{"--demo-delay=0"}, slog.New(slog.DiscardHandler))
	url := base + "/agentd.v1.AgentService/ExecuteRun"
	body := `{"start":{"input":"what is 2+2?"}}`
	do := func(header map[string]string, host string) (int, string) {
		req, _ := http.NewRequestWithContext(srv.ctx, http.MethodPost, url, strings.NewReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name   string
		header map[string]string
		host   string
		want   int
	}{
		{"no content type", nil, "", http.StatusUnsupportedMediaType},
		{"text/plain", map[string]string{"Content-Type": "text/plain"}, "", http.StatusUnsupportedMediaType},
		{"a form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "", http.StatusUnsupportedMediaType},
		{"another origin", map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, "", http.StatusForbidden},
		{"another host name", map[string]string{"Content-Type": "application/json"}, "rebound.example:80", http.StatusForbidden},
		{"the console's own origin", map[string]string{"Content-Type": "application/json", "Origin": base}, "", http.StatusOK},
		{"localhost", map[string]string{"Content-Type": "application/json"}, "localhost", http.StatusOK},
		{"curl", map[string]string{"Content-Type": "application/json"}, "", http.StatusOK},
	} {
		if status, b := do(tc.header, tc.host); status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, status, b, tc.want)
		}
	}

	// With auth on, a page cannot use the caller's token: another host name is served
	// (a proxy's, a mesh's), and needs a token like any request.
	srv, base = startServeHTTP(t, []string{"--demo-delay=0", "--auth-tokens-file", tokensFile(t)}, slog.New(slog.DiscardHandler))
	url = base + "/agentd.v1.AgentService/ExecuteRun"
	if status, b := do(map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + tokenA}, "agentd.internal"); status != http.StatusOK {
		t.Errorf("with auth, another host name: %d %s, want 200", status, b)
	}
}

// Without auth, the Host check holds on every address, not on loopback alone: a listener
// on all addresses (or in a container published on 127.0.0.1) refuses a rebound name,
// and serves localhost, IP addresses and the names of --http-allowed-hosts.
func TestHTTPHostCheckOnEveryAddress(t *testing.T) {
	_, port, _ := net.SplitHostPort(agentdtest.FreeAddr(t))
	srv := startServe(t, []string{"--demo-delay=0", "--http-listen", "0.0.0.0:" + port, "--http-allowed-hosts", "agentd.example,.corp.example"}, slog.New(slog.DiscardHandler))
	url := "http://127.0.0.1:" + port + "/agentd.v1.AgentService/ExecuteRun"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		host string
		want int
	}{
		{"rebound.example:" + port, http.StatusForbidden},
		{"agentd.example.rebound.example", http.StatusForbidden},
		{"localhost:" + port, http.StatusOK},
		{"127.0.0.1:" + port, http.StatusOK},
		{"[::1]:" + port, http.StatusOK},
		{"192.0.2.7:" + port, http.StatusOK},
		{"agentd.example:" + port, http.StatusOK},
		{"corp.example", http.StatusOK},
		{"a.corp.example:" + port, http.StatusOK},
	} {
		req, _ := http.NewRequestWithContext(srv.ctx, http.MethodPost, url, strings.NewReader(`{"start":{"input":"what is 2+2?"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Host = tc.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %s: %d %s, want %d", tc.host, resp.StatusCode, b, tc.want)
		}
	}
}

// breakingJSON is protojson, except that a RunRequest of client_seq 2 goes out as JSON
// that does not decode: what a buggy or hostile client sends mid-stream.
type breakingJSON struct{}

func (breakingJSON) Name() string { return "json" }

func (breakingJSON) Marshal(v any) ([]byte, error) {
	if rr, ok := v.(*agentdv1.RunRequest); ok && rr.GetClientSeq() == 2 {
		return []byte(`{"steer":`), nil
	}
	return protojson.Marshal(v.(proto.Message))
}

func (breakingJSON) Unmarshal(b []byte, v any) error {
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, v.(proto.Message))
}

// A Run stream's message that does not decode from JSON is refused in its ack
// (INVALID_MESSAGE) and the run goes on: refused by the transcoder, it ended the stream
// from the goroutine reading the body while the handler wrote to it, a data race on the
// response's headers that could crash the process.
func TestHTTPRunUndecodableMessageIsAnAck(t *testing.T) {
	srv, base := startServeHTTP(t, []string{"--demo-delay=0"}, slog.New(slog.DiscardHandler))
	client := connect.NewClient[agentdv1.RunRequest, agentdv1.RunResponse](h2cClient(), base+"/agentd.v1.AgentService/Run", connect.WithCodec(breakingJSON{}))
	stream := client.CallBidiStream(srv.ctx)
	defer stream.CloseResponse()
	if err := stream.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: &agentdv1.RunSpec{Input: "save a note: buy milk"}}}); err != nil {
		t.Fatal(err)
	}
	var fin *agentdv1.RunFinished
	var refused *agentdv1.InputAck
	for fin == nil {
		resp, err := stream.Receive()
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		ev := resp.GetEvent()
		if ar := ev.GetApprovalRequested(); ar != nil {
			if err := stream.Send(&agentdv1.RunRequest{ClientSeq: 2, Kind: &agentdv1.RunRequest_Ping{Ping: &agentdv1.Ping{}}}); err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&agentdv1.RunRequest{ClientSeq: 3, Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
				ApprovalId: ar.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
			}}}); err != nil {
				t.Fatal(err)
			}
		}
		if a := ev.GetInputAck(); a != nil && !a.GetAccepted() {
			refused = a
		}
		fin = ev.GetRunFinished()
	}
	if refused.GetError().GetReason() != "INVALID_MESSAGE" || !strings.Contains(refused.GetError().GetMessage(), "invalid JSON") {
		t.Errorf("the undecodable message was acked %v, want refused INVALID_MESSAGE saying the JSON is invalid", refused)
	}
	if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
		t.Errorf("the run ended %v, want COMPLETED: the decision after the bad message is taken", fin.GetReason())
	}
}
