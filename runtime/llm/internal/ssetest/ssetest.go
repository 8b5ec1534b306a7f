// Package ssetest is a fake provider for the adapters' tests: an httptest server that
// answers each request with the next scripted [Reply] (an error response, a recorded
// SSE stream from testdata, a stream cut short or held open) and records the requests.
package ssetest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/runtime"
)

// Reply is one scripted answer.
type Reply struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// Header is added to the response's header.
	Header http.Header
	// Body is sent as it is, after File's events.
	Body string
	// File is an SSE file to stream: one event per write, each flushed.
	File string
	// Gap is a pause before each of File's events but the first: a stream that is slow
	// but steady.
	Gap time.Duration
	// Cut aborts the connection after the body, without ending the response: the
	// client sees the connection dropped (before the first byte when there is no body).
	Cut bool
	// Hold keeps the response open after the body until the client goes away, then
	// closes [Server.Gone].
	Hold bool
}

// Request is a request the server got.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	// JSON is the body decoded, or nil.
	JSON map[string]any
}

// Server is the fake provider. It is safe for concurrent use.
type Server struct {
	*httptest.Server
	// Gone is closed when the client of a Hold reply has gone away.
	Gone chan struct{}

	t       testing.TB
	path    string
	mu      sync.Mutex
	replies []Reply
	reqs    []Request
	gone    sync.Once
}

// New starts a server that answers POSTs to path with replies, in order, and fails t
// on any other request or when the replies run out. It stops with t.Cleanup.
func New(t testing.TB, path string, replies ...Reply) *Server {
	t.Helper()
	s := &Server{t: t, path: path, replies: replies, Gone: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Requests returns the requests so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Errorf("reading the request body: %v", err)
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	json.Unmarshal(body, &req.JSON)
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	var rep Reply
	ok := len(s.replies) > 0
	if ok {
		rep, s.replies = s.replies[0], s.replies[1:]
	}
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != s.path {
		s.t.Errorf("got %s %s, want POST %s", r.Method, r.URL.Path, s.path)
		http.Error(w, "unexpected request", http.StatusNotFound)
		return
	}
	if !ok {
		s.t.Errorf("request %d: no reply scripted", len(s.Requests()))
		http.Error(w, "no reply scripted", http.StatusInternalServerError)
		return
	}
	if rep.Cut && rep.File == "" && rep.Body == "" {
		panic(http.ErrAbortHandler)
	}
	for k, vs := range rep.Header {
		w.Header()[k] = vs
	}
	if rep.File != "" && w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	if rep.Status == 0 {
		rep.Status = http.StatusOK
	}
	w.WriteHeader(rep.Status)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	if rep.File != "" {
		data, err := os.ReadFile(rep.File)
		if err != nil {
			s.t.Errorf("reply: %v", err)
			return
		}
		first := true
		for ev := range bytes.SplitAfterSeq(data, []byte("\n\n")) {
			if len(ev) == 0 {
				continue
			}
			if !first && rep.Gap > 0 {
				select {
				case <-time.After(rep.Gap):
				case <-r.Context().Done():
					return
				}
			}
			first = false
			w.Write(ev)
			flush()
		}
	}
	io.WriteString(w, rep.Body)
	flush()
	switch {
	case rep.Cut:
		panic(http.ErrAbortHandler)
	case rep.Hold:
		select {
		case <-r.Context().Done():
			s.gone.Do(func() { close(s.Gone) })
		case <-time.After(10 * time.Second):
			s.t.Errorf("the client kept the held stream open for 10s")
		}
	}
}

// Silent returns a reply that sends the headers of an SSE stream, then nothing until the
// client goes away: a stalled server.
func Silent() Reply {
	return Reply{Header: http.Header{"Content-Type": {"text/event-stream"}}, Hold: true}
}

// JSONError returns a reply with status and a JSON body.
func JSONError(status int, header http.Header, body string) Reply {
	if header == nil {
		header = http.Header{}
	}
	header.Set("Content-Type", "application/json")
	return Reply{Status: status, Header: header, Body: body}
}

// Sleeps records the waits between an adapter's retries instead of waiting; pass its
// Sleep to the adapter's test hook. It is safe for concurrent use.
type Sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

// Sleep records d and returns ctx's error.
func (s *Sleeps) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return ctx.Err()
}

// Waits returns the waits recorded so far.
func (s *Sleeps) Waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// Collect reads a model's whole stream, returning the events before any error, less
// the reports of the model that served the call (runtime.ModelResponseInfo), which
// tests of their own check: the rest is what the runtime assembles.
func Collect(t testing.TB, ctx context.Context, m runtime.Model, req *runtime.ModelRequest) ([]runtime.ModelEvent, error) {
	t.Helper()
	var evs []runtime.ModelEvent
	for ev, err := range m.Stream(ctx, req) {
		if err != nil {
			return evs, err
		}
		if ev.Kind != runtime.ModelResponseInfo {
			evs = append(evs, ev)
		}
	}
	return evs, nil
}

// Usage returns a usage event.
func Usage(u runtime.Usage) runtime.ModelEvent {
	return runtime.ModelEvent{Kind: runtime.ModelUsage, Index: -1, Usage: u}
}
