package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The HTTP listener reads request bodies itself before vanguard transcodes them, so that
// what a caller sends costs agentd no more than it has to, and nothing before auth:
//
//   - a call's token is checked on its headers, before any of its body is read;
//   - a unary call's body (plain JSON, Connect unary) is read whole, at most the message
//     bound, and within the first-message deadline, before it is transcoded; a stream's
//     messages (Connect streams, gRPC-Web, gRPC) are read one whole envelope at a time,
//     the first within that deadline;
//   - a message is transcoded only when the listener has room for it: the messages being
//     transcoded at once hold at most transcodeBytes (JSON costs many times its size as
//     the protobuf message it becomes);
//   - a stream holds at most one message's bound that gRPC has not taken yet: gRPC's
//     HTTP handler reads a request body with no flow control of its own;
//   - gzip is inflated to the message bound at most.
//
// A refusal is written by refuseHandler, between vanguard and the gRPC server, as a gRPC
// status, which vanguard turns into the caller's protocol.

// httpMaxMessageBytes is the largest message the HTTP listener takes or sends, as sent
// (JSON or protobuf) and as inflated: --max-message-bytes and a quarter, since a message's
// JSON is larger than its protobuf encoding. A finished run's transcript larger than that
// reaches HTTP clients as RESOURCE_EXHAUSTED.
func httpMaxMessageBytes(cfg config) uint32 {
	return uint32(min(int64(cfg.maxMessageBytes)+int64(cfg.maxMessageBytes)/4, 1<<31))
}

// transcodeBytes is how many bytes of request messages the HTTP listener transcodes at
// once: four messages of the largest size.
func transcodeBytes(cfg config) int64 { return 4 * int64(httpMaxMessageBytes(cfg)) }

// refusalKey is the context key of a refusal the HTTP listener decided on before
// vanguard: refuseHandler answers the call with it.
type refusalKey struct{}

// receivedKey is the context key of the func an RPC's listener asks to be told through
// when gRPC has decoded one of the call's messages ([receivedStats]).
type receivedKey struct{}

// httpBodies reads the HTTP listener's request bodies (see above). It is safe for
// concurrent use.
type httpBodies struct {
	maxMessage   int64
	firstMessage func(method string) time.Duration // the deadline of a call's first message
	authn        *authenticator                    // nil: no token is needed
	needsToken   func(path string) bool
	gate         *semaphore.Weighted // bytes of messages being transcoded
}

// wrap returns h behind the body rules.
func (b *httpBodies) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions {
			h.ServeHTTP(w, r) // the console, preflights: no body
			return
		}
		if b.authn != nil && b.needsToken(r.URL.Path) {
			if _, err := b.authn.authenticate(headerContext(r)); err != nil {
				refuse(h, w, r, err)
				return
			}
		}
		call := &httpCall{bodies: b, rc: http.NewResponseController(w), ctx: r.Context()}
		defer call.done()
		call.setDeadline(time.Now().Add(b.firstMessage(r.URL.Path)))
		ctx := context.WithValue(r.Context(), receivedKey{}, call.received)
		if ct := r.Header.Get("Content-Type"); enveloped(ct) {
			r.Body = &envelopeReader{call: call, src: r.Body, connect: strings.HasPrefix(ct, "application/connect+")}
			h.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		body, err := call.readUnary(r)
		if err != nil {
			// A read past its deadline ends the request's context too (HTTP/1): the
			// answer is written all the same.
			if r.Context().Err() == nil || status.Code(err) == codes.DeadlineExceeded {
				refuse(h, w, r, err)
			}
			return
		}
		weight := int64(len(body))
		if ce := r.Header.Get("Content-Encoding"); ce != "" && ce != "identity" {
			weight = b.maxMessage // what it inflates to is known only as it is inflated
		}
		if err := call.acquire(weight); err != nil {
			return // the client went away
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// headerContext returns r's context with its headers as gRPC metadata, for the
// authenticator.
func headerContext(r *http.Request) context.Context {
	md := metadata.MD{}
	for k, v := range r.Header {
		md[strings.ToLower(k)] = v
	}
	return metadata.NewIncomingContext(r.Context(), md)
}

// refuse answers r with err through h, which hands it to refuseHandler: the body is not
// read, and the caller gets err in its own protocol.
func refuse(h http.Handler, w http.ResponseWriter, r *http.Request, err error) {
	body := r.Body
	if r.ProtoMajor == 1 {
		// The body is left unread, and the connection with it: net/http would read the
		// rest of a small one, with no deadline, to use the connection again.
		w.Header().Set("Connection", "close")
	}
	r.Body, r.ContentLength = http.NoBody, 0
	h.ServeHTTP(w, r.WithContext(context.WithValue(context.WithoutCancel(r.Context()), refusalKey{}, err)))
	if r.ProtoMajor == 1 && !strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		linger(w, body)
	}
}

// How long, and for how many bytes, a refused HTTP/1 request's body is read and thrown
// away after its answer.
const (
	lingerTime  = 2 * time.Second
	lingerBytes = 64 << 20
)

// linger sends w's answer, then reads and drops what is left of body for a while before
// the connection is closed: closed with unread bytes, a TCP connection is reset, and a
// client still writing its body would lose the answer with it. It costs no memory per
// byte; an HTTP/2 stream needs none of it.
func linger(w http.ResponseWriter, body io.Reader) {
	rc := http.NewResponseController(w)
	if rc.Flush() != nil || rc.SetReadDeadline(time.Now().Add(lingerTime)) != nil {
		return
	}
	_, _ = io.CopyN(io.Discard, body, lingerBytes)
}

// enveloped reports whether a request of content type ct carries its messages in
// envelopes (Connect streams, gRPC, gRPC-Web), not as its whole body.
func enveloped(ct string) bool {
	return strings.HasPrefix(ct, "application/connect+") || ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+") ||
		ct == "application/grpc-web" || strings.HasPrefix(ct, "application/grpc-web+")
}

// httpCall is one HTTP call's state as its body is read. Its methods are called from the
// goroutine that reads the body and from the RPC's (received), so mu guards it.
type httpCall struct {
	bodies *httpBodies
	rc     *http.ResponseController
	ctx    context.Context

	mu       sync.Mutex
	ended    bool    // the handler returned: rc is not to be used
	deadline bool    // a read deadline is set
	held     int64   // gate bytes held for messages being transcoded
	pending  []int64 // what the messages handed on that gRPC has not taken count, oldest first
	waiting  int64   // their sum
	room     chan struct{}
}

// setDeadline sets the read deadline of the call's body (zero clears it). A listener
// that cannot set one (HTTP/1 over a connection that is not a net.Conn) goes without.
func (c *httpCall) setDeadline(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || (t.IsZero() && !c.deadline) {
		return
	}
	c.deadline = !t.IsZero()
	_ = c.rc.SetReadDeadline(t)
}

// readUnary reads a unary call's body whole, refusing one past the message bound or
// slower than the first-message deadline.
func (c *httpCall) readUnary(r *http.Request) ([]byte, error) {
	limit := c.bodies.maxMessage
	if r.ContentLength > limit {
		return nil, tooLarge(r.ContentLength, limit)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	switch {
	case isTimeout(err):
		return nil, status.Errorf(codes.DeadlineExceeded, "the request's body did not arrive within %s of its headers (--start-timeout)", c.bodies.firstMessage(r.URL.Path))
	case err != nil:
		return nil, status.Errorf(codes.Canceled, "reading the request's body: %v", err)
	case int64(len(body)) > limit:
		return nil, tooLarge(-1, limit)
	}
	c.setDeadline(time.Time{})
	return body, nil
}

// isTimeout reports whether err is a read past its deadline: os.ErrDeadlineExceeded
// (HTTP/1) or HTTP/2's own timeout.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// tooLarge refuses a message of size n (-1: unknown) past limit.
func tooLarge(n, limit int64) error {
	if n < 0 {
		return status.Errorf(codes.ResourceExhausted, "the request's message is larger than %d bytes, the largest this listener takes (--max-message-bytes and a quarter, for JSON)", limit)
	}
	return status.Errorf(codes.ResourceExhausted, "the request's message is %d bytes, larger than %d, the largest this listener takes (--max-message-bytes and a quarter, for JSON)", n, limit)
}

// acquire holds n bytes of the transcode gate for the call, waiting for room.
func (c *httpCall) acquire(n int64) error {
	if err := c.bodies.gate.Acquire(c.ctx, n); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held += n
	if c.ended { // the handler returned while this waited: nothing releases it later
		c.releaseLocked()
	}
	return nil
}

// releaseLocked gives back the gate bytes the call holds: its messages are transcoded.
func (c *httpCall) releaseLocked() {
	if c.held > 0 {
		c.bodies.gate.Release(c.held)
		c.held = 0
	}
}

// received is told that gRPC decoded one of the call's messages: it is transcoded, and
// taken.
func (c *httpCall) received() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked()
	if len(c.pending) > 0 {
		c.waiting -= c.pending[0]
		c.pending = c.pending[1:]
		if c.room != nil {
			close(c.room)
			c.room = nil
		}
	}
}

// minEnvelopeCost is what a message handed on counts at least against the read-ahead
// bound: gRPC keeps each message it has not taken apart, so empty ones are not free.
const minEnvelopeCost = 512

// handOn waits until gRPC has taken enough of the call's earlier messages for one of n
// bytes to wait beside them, within the message bound, and counts it.
func (c *httpCall) handOn(n int64) error {
	cost := max(n, minEnvelopeCost)
	for {
		c.mu.Lock()
		if len(c.pending) == 0 || c.waiting+cost <= c.bodies.maxMessage {
			c.pending = append(c.pending, cost)
			c.waiting += cost
			c.mu.Unlock()
			return nil
		}
		if c.room == nil {
			c.room = make(chan struct{})
		}
		room := c.room
		c.mu.Unlock()
		select {
		case <-room:
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
	}
}

// done ends the call: its handler returned.
func (c *httpCall) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked()
	c.ended = true
}

// envelopeReader reads a stream's body one whole envelope at a time (a flags byte, a
// 4-byte length, the message): the first within the first-message deadline, each only
// once the transcode gate has room for it and gRPC has taken the ones before it. An
// envelope past the message bound is passed on unread after its prefix, for vanguard to
// refuse.
type envelopeReader struct {
	call    *httpCall
	src     io.ReadCloser
	buf     []byte // the envelope being handed on
	off     int
	pass    bool // the rest of the body goes through as it is
	connect bool // the Connect protocol's envelopes, whose flags 0x02 ends a response stream
	second  bool // the first envelope has come
	err     error
}

func (e *envelopeReader) Read(p []byte) (int, error) {
	if e.off < len(e.buf) {
		n := copy(p, e.buf[e.off:])
		e.off += n
		return n, nil
	}
	if e.pass {
		return e.src.Read(p)
	}
	if e.err != nil {
		return 0, e.err
	}
	if err := e.next(); err != nil {
		e.err = err
		if e.off < len(e.buf) {
			return e.Read(p)
		}
		return 0, err
	}
	return e.Read(p)
}

// next reads the next envelope whole into buf.
func (e *envelopeReader) next() error {
	c := e.call
	// The envelope before this one was handed on whole: vanguard has transcoded it.
	c.mu.Lock()
	c.releaseLocked()
	c.mu.Unlock()
	var prefix [5]byte
	if _, err := io.ReadFull(e.src, prefix[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			e.buf, e.off = append(e.buf[:0], prefix[:]...), 0 // a truncated prefix: vanguard says so
			return io.EOF
		}
		return err
	}
	n := int64(binary.BigEndian.Uint32(prefix[1:]))
	if n > c.bodies.maxMessage {
		e.buf, e.off, e.pass = append(e.buf[:0], prefix[:]...), 0, true
		return nil
	}
	if int64(cap(e.buf)) < 5+n {
		e.buf = make([]byte, 5+n)
	}
	e.buf, e.off = e.buf[:5+n], 0
	copy(e.buf, prefix[:])
	if _, err := io.ReadFull(e.src, e.buf[5:]); err != nil {
		e.buf = e.buf[:0]
		return err
	}
	if !e.second {
		e.second = true
		c.setDeadline(time.Time{})
	}
	// Connect's end-of-stream envelope (flags 0x02) is a response's; one a client sends
	// ends its request stream here. Passed on, vanguard refused it from the goroutine
	// reading the body while the handler wrote its headers: a data race inside vanguard.
	if e.connect && prefix[0]&0x02 != 0 {
		e.buf, e.off = e.buf[:0], 0
		return io.EOF
	}
	weight := n
	if prefix[0]&0x01 != 0 {
		weight = c.bodies.maxMessage // compressed: what it inflates to is known only as it is
	}
	if err := c.handOn(n); err != nil {
		return err
	}
	return c.acquire(weight)
}

func (e *envelopeReader) Close() error { return e.src.Close() }

// refuseHandler is the handler vanguard calls for gRPC's: it answers a call the HTTP
// listener refused (refusalKey) with the refusal as a gRPC status, which vanguard
// writes in the caller's protocol, and hands the rest to gs.
func refuseHandler(gs *grpc.Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err, _ := r.Context().Value(refusalKey{}).(error)
		if err == nil {
			gs.ServeHTTP(w, r)
			return
		}
		st := status.Convert(err)
		h := w.Header()
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", fmt.Sprint(int(st.Code())))
		h.Set("Grpc-Message", encodeGrpcMessage(st.Message()))
		w.WriteHeader(http.StatusOK)
	})
}

// encodeGrpcMessage percent-encodes a grpc-message value, as the gRPC protocol asks.
func encodeGrpcMessage(msg string) string {
	var sb strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= ' ' && c <= '~' && c != '%' {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

// boundedGzip is the HTTP listener's gzip decompressor: it inflates a message to limit
// bytes at most, and refuses one that would be larger as soon as it passes it.
type boundedGzip struct {
	gzip.Reader
	limit, n int64
}

func (z *boundedGzip) Reset(r io.Reader) error {
	z.n = 0
	return z.Reader.Reset(r)
}

func (z *boundedGzip) Read(p []byte) (int, error) {
	if room := z.limit + 1 - z.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := z.Reader.Read(p)
	z.n += int64(n)
	if z.n > z.limit {
		return 0, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("the gzip message inflates to more than %d bytes, the largest this listener takes (--max-message-bytes and a quarter, for JSON)", z.limit))
	}
	return n, err
}
