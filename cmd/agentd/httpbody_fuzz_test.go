package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// fuzzHTTP returns the HTTP listener's handler over a real agentd (the demo agent,
// answering at once) with a 64 KiB message bound, stopped when tb ends.
func fuzzHTTP(tb testing.TB) http.Handler {
	cfg, err := parseConfig([]string{"--demo-delay=0", "--max-message-bytes=65536", "--start-timeout=2s", "--http-listen=localhost:0"}, env(nil), io.Discard)
	if err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	opts, err := serverOptions(cfg, log, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := newServer(cfg, log, nil)
	if err != nil {
		tb.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	d.register(gs)
	tb.Cleanup(func() {
		gs.Stop()
		d.close()
	})
	h, err := httpHandler(gs, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// The protocols FuzzHTTPBody sends its bodies in: a path and a content type, and the
// header that says a body (or its envelopes) is gzip.
var fuzzProtocols = []struct{ path, contentType, gzipHeader string }{
	{"/agentd.v1.AgentService/ExecuteRun", "application/json", "Content-Encoding"},
	{"/agentd.v1.AgentService/ListAgents", "application/proto", "Content-Encoding"},
	{"/agentd.v1.AgentService/StartRun", "application/connect+json", "Connect-Content-Encoding"},
	{"/agentd.v1.AgentService/StartRun", "application/grpc-web+proto", "Grpc-Encoding"},
	{"/agentd.v1.AgentService/StartRun", "application/grpc", "Grpc-Encoding"},
	{"/agentd.v1.AgentService/Run", "application/connect+json", "Connect-Content-Encoding"},
}

// FuzzHTTPBody sends any body, in any protocol of the HTTP listener, compressed or not,
// and holds every one to a bound on what it may cost: a few times the message bound
// (64 KiB here) and its own size, whatever it claims to inflate or decode to.
func FuzzHTTPBody(f *testing.F) {
	bomb := inflating(f, 8<<20)
	f.Add(uint8(0), false, []byte(`{"start":{"input":"what is 2+2?"}}`))
	f.Add(uint8(0), true, bomb)
	f.Add(uint8(0), false, tinyParts(60<<10))
	f.Add(uint8(1), false, []byte{})
	f.Add(uint8(2), false, envelope(0, []byte(`{"start":{"input":"what is 2+2?"}}`)))
	f.Add(uint8(2), true, envelope(1, bomb))
	f.Add(uint8(2), false, envelope(0, tinyParts(60<<10)))
	f.Add(uint8(3), true, envelope(1, bomb))
	f.Add(uint8(3), false, []byte{0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3})
	f.Add(uint8(4), false, []byte{0, 0, 0, 0})
	f.Add(uint8(5), false, append(envelope(0, []byte(`{"start":{"input":"hi"}}`)), envelope(2, []byte(`{}`))...))
	f.Add(uint8(5), false, append(envelope(0, []byte(`{"start":{"input":"hi"}}`)), 0, 0, 0, 0, 9, '{'))
	f.Add(uint8(5), false, append(envelope(0, []byte(`{"start":{"input":"hi"}}`)), envelope(0, []byte(`{"steer":`))...))
	f.Add(uint8(5), false, envelope(0, []byte(`{"start":`)))
	h := fuzzHTTP(f)
	f.Fuzz(func(t *testing.T, kind uint8, gzipped bool, body []byte) {
		p := fuzzProtocols[int(kind)%len(fuzzProtocols)]
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, p.path, bytes.NewReader(body))
		req.Host = "localhost"
		req.Header.Set("Content-Type", p.contentType)
		if p.contentType == "application/proto" {
			req.Header.Set("Connect-Protocol-Version", "1")
		}
		if gzipped {
			req.Header.Set(p.gzipHeader, "gzip")
		}
		if p.contentType == "application/grpc" || p.path == "/agentd.v1.AgentService/Run" {
			req.ProtoMajor, req.ProtoMinor, req.Proto = 2, 0, "HTTP/2.0"
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		rec := httptest.NewRecorder()
		began := time.Now()
		h.ServeHTTP(rec, req)
		took := time.Since(began)
		runtime.ReadMemStats(&after)
		if took > 10*time.Second {
			t.Errorf("a %d-byte body (%s, gzip %v) held its call %s: %q", len(body), p.contentType, gzipped, took, body)
		}
		if rec.Code == http.StatusForbidden || rec.Code == http.StatusUnsupportedMediaType {
			t.Fatalf("%s: %d %s: the body never reached the transcoder", p.contentType, rec.Code, rec.Body)
		}
		if cost, bound := after.TotalAlloc-before.TotalAlloc, uint64(16<<20+64*len(body)); cost > bound {
			t.Errorf("a %d-byte body (%s, gzip %v) cost %d bytes, want at most %d", len(body), p.contentType, gzipped, cost, bound)
		}
	})
}
