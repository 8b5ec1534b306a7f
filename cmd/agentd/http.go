package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/cors"
	"connectrpc.com/vanguard"
	"connectrpc.com/vanguard/vanguardgrpc"
	rscors "github.com/rs/cors"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/agentd/agentd/web/console"
)

// The HTTP listener (--http-listen) serves every service of the gRPC server over the
// Connect protocol (JSON or protobuf: plain JSON POSTs from curl), gRPC-Web (browsers) and
// gRPC itself, and the web console at /. Each call is transcoded in-process by
// connectrpc.com/vanguard into a gRPC call that the grpc.Server handles (its ServeHTTP):
// there is one implementation of every RPC, and the interceptors (auth, rate limits,
// hooks, audit, logging), the stats handler (tracing, metrics), the codec and the message
// size limit apply to calls of either listener alike. Unary and server-streaming RPCs work
// over HTTP/1.1 and HTTP/2; Run, a bidirectional stream, needs HTTP/2 end to end (h2c on
// plaintext, ALPN with --tls-cert), which browsers cannot do: the console uses StartRun,
// AttachRun and SendRunInput.

// httpMaxMessageBytes is the largest message the HTTP listener buffers, either way, as its
// JSON (larger than its protobuf encoding): four times --max-message-bytes. A finished
// run's transcript larger than that reaches HTTP clients as RESOURCE_EXHAUSTED; gRPC
// clients have no such bound on what agentd sends.
func httpMaxMessageBytes(cfg config) uint32 {
	return uint32(min(4*int64(cfg.maxMessageBytes), 1<<31))
}

// httpHandler returns what the HTTP listener serves: gs's services through vanguard, the
// console for every other path, and CORS for the origins of --http-cors-origins (none by
// default: browsers then reach agentd only from the console's own origin).
func httpHandler(gs *grpc.Server, cfg config) (http.Handler, error) {
	tc, err := vanguardgrpc.NewTranscoder(gs,
		vanguard.WithCodec(func(res vanguard.TypeResolver) vanguard.Codec {
			// Zero values left out, as protojson does by default, so that what curl prints
			// is what the run did; a field the message does not have is an error
			// (INVALID_ARGUMENT naming it), as a misspelt field in a hand-written request
			// should be, not silently dropped.
			return jsonCodec{&vanguard.JSONCodec{
				MarshalOptions:   protojson.MarshalOptions{Resolver: res},
				UnmarshalOptions: protojson.UnmarshalOptions{Resolver: res},
			}}
		}),
		vanguard.WithDefaultServiceOptions(vanguard.WithMaxMessageBufferBytes(httpMaxMessageBytes(cfg))),
		vanguard.WithRules(plainJSONRules(gs)...),
		vanguard.WithUnknownHandler(console.Handler()),
	)
	if err != nil {
		return nil, fmt.Errorf("--http-listen: %w", err)
	}
	h := batchFlushes(tc, httpFlushDelay)
	origins := corsOrigins(cfg.httpCORSOrigins)
	if len(origins) == 0 {
		return h, nil
	}
	c := rscors.New(rscors.Options{
		AllowedOrigins: origins,
		AllowedMethods: cors.AllowedMethods(),
		// authorization: bearer tokens; the rest are the protocols' own.
		AllowedHeaders: append(cors.AllowedHeaders(), "Authorization"),
		ExposedHeaders: cors.ExposedHeaders(),
		MaxAge:         int((2 * time.Hour).Seconds()),
	})
	return c.Handler(h), nil
}

// jsonCodec is vanguard's JSON codec, except that JSON it cannot decode is the client's
// error, INVALID_ARGUMENT (HTTP 400) with protojson's message, not INTERNAL.
type jsonCodec struct{ *vanguard.JSONCodec }

func (c jsonCodec) Unmarshal(data []byte, msg proto.Message) error {
	return invalidJSON(c.JSONCodec.Unmarshal(data, msg))
}

func (c jsonCodec) UnmarshalField(data []byte, msg proto.Message, field protoreflect.FieldDescriptor) error {
	return invalidJSON(c.JSONCodec.UnmarshalField(data, msg, field))
}

func invalidJSON(err error) error {
	if err == nil {
		return nil
	}
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("invalid JSON request: %w", err))
}

// plainJSONRules lets every unary RPC of gs be called with a plain JSON POST to its gRPC
// path, as curl sends it (-H 'Content-Type: application/json' -d '{…}'), with no
// Connect-Protocol-Version header: vanguard takes such a request for REST, and these
// rules map the RPC's own path, whole body to request message, onto it. The answer is the
// response message as JSON, or a google.rpc.Status as JSON with the HTTP status of its
// code. Streaming RPCs have no plain-JSON form: they take the Connect protocol's framing.
func plainJSONRules(gs *grpc.Server) []*annotations.HttpRule {
	var rules []*annotations.HttpRule
	for svc, info := range gs.GetServiceInfo() {
		for _, m := range info.Methods {
			if m.IsClientStream || m.IsServerStream {
				continue
			}
			rules = append(rules, &annotations.HttpRule{
				Selector: svc + "." + m.Name,
				Pattern:  &annotations.HttpRule_Post{Post: "/" + svc + "/" + m.Name},
				Body:     "*",
			})
		}
	}
	return rules
}

// corsOrigins splits --http-cors-origins: origins separated by commas ("*" allows any).
func corsOrigins(s string) []string {
	var out []string
	for o := range strings.SplitSeq(s, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// checkHTTP returns what is wrong with the HTTP listener's flags.
func (cfg config) checkHTTP() []error {
	var errs []error
	if cfg.httpListen == "" && cfg.httpCORSOrigins != "" {
		errs = append(errs, errors.New("--http-cors-origins needs --http-listen"))
	}
	for _, o := range corsOrigins(cfg.httpCORSOrigins) {
		if o != "*" && !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			errs = append(errs, fmt.Errorf("--http-cors-origins: %q is not an origin: want scheme://host[:port], such as https://console.example.com, or *", o))
		}
	}
	return errs
}

// newHTTPServer returns the http.Server of the HTTP listener: HTTP/1.1, and HTTP/2 (h2c
// on plaintext, so that Run works; with tlsCfg, negotiated by ALPN). The connection
// limits of the gRPC listener apply to it too: handshake timeout, idle connections, and
// streams per connection.
func newHTTPServer(h http.Handler, cfg config, tlsCfg *tls.Config, log *slog.Logger) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	if tlsCfg != nil {
		protocols.SetHTTP2(true)
		tlsCfg = tlsCfg.Clone()
		tlsCfg.NextProtos = []string{"h2", "http/1.1"}
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	return &http.Server{
		Handler:           h,
		Protocols:         &protocols,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: cfg.handshakeTimeout,
		IdleTimeout:       cfg.maxConnIdle,
		MaxHeaderBytes:    64 << 10,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: cfg.maxStreamsPerConn,
			MaxReadFrameSize:     1 << 20,
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}

// serveHTTP serves hs on lis (TLS when hs has a TLSConfig) until it is shut down.
func serveHTTP(hs *http.Server, lis net.Listener) error {
	var err error
	if hs.TLSConfig != nil {
		err = hs.ServeTLS(lis, "", "")
	} else {
		err = hs.Serve(lis)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// httpDrainTimeout bounds how long, at shutdown, the HTTP listener waits for its calls to
// end once the runs have: they then only deliver their last events. Streams that would
// stay open (a health Watch) are closed by the gRPC server's stop.
const httpDrainTimeout = 5 * time.Second

// shutdownHTTP stops hs taking calls and waits, at most httpDrainTimeout or until ctx is
// done, for those it has to end.
func shutdownHTTP(ctx context.Context, hs *http.Server) {
	ctx, cancel := context.WithTimeout(ctx, httpDrainTimeout)
	defer cancel()
	_ = hs.Shutdown(ctx)
}

// listenHTTP opens the HTTP listener of cfg and returns its server, serving gs.
func listenHTTP(gs *grpc.Server, cfg config, log *slog.Logger) (*http.Server, net.Listener, error) {
	h, err := httpHandler(gs, cfg)
	if err != nil {
		return nil, nil, err
	}
	tlsCfg, err := serverTLS(cfg)
	if err != nil {
		return nil, nil, err
	}
	lis, err := net.Listen("tcp", cfg.httpListen)
	if err != nil {
		return nil, nil, fmt.Errorf("--http-listen: %w", err)
	}
	return newHTTPServer(h, cfg, tlsCfg, log), lis, nil
}

// consoleURL is the web console's address on the HTTP listener at addr, as a person on
// this machine would open it.
func consoleURL(addr net.Addr, tls bool) string {
	scheme := "http"
	if tls {
		scheme = "https"
	}
	host := addr.String()
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		host = net.JoinHostPort("localhost", fmt.Sprint(tcp.Port))
	}
	return scheme + "://" + host + "/"
}

// httpFlushDelay is how long the HTTP listener holds a stream's written messages before it
// flushes them to the connection. gRPC's ServeHTTP and vanguard flush after every message;
// on HTTP each flush is a write to the socket (a syscall, a chunk or a DATA frame), a third
// of the CPU of a stream of small deltas, where the gRPC listener's writer batches what is
// queued into one. Held this long, the messages of a burst leave together; a message
// alone leaves this much later, which no reader of a model's stream notices.
const httpFlushDelay = 500 * time.Microsecond

// batchFlushes returns h with every response's flushes batched: a Flush is carried out
// httpFlushDelay after the first one not yet carried out, together with those after it,
// and at the latest when the handler returns.
func batchFlushes(h http.Handler, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		if !ok {
			h.ServeHTTP(w, r)
			return
		}
		bw := &batchingWriter{ResponseWriter: w, flusher: f, delay: delay}
		defer bw.finish()
		h.ServeHTTP(bw, r)
	})
}

// batchingWriter is a ResponseWriter whose flushes are batched (batchFlushes). The flush
// runs on a timer's goroutine, so mu serialises it with the handler's writes: a
// ResponseWriter is not safe for concurrent use.
type batchingWriter struct {
	http.ResponseWriter
	flusher http.Flusher
	delay   time.Duration

	mu      sync.Mutex
	pending *time.Timer // set while a flush waits
	done    bool        // the handler returned: the ResponseWriter is not to be used
}

func (w *batchingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

func (w *batchingWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ResponseWriter.WriteHeader(code)
}

// Flush schedules a flush, unless one is already scheduled.
func (w *batchingWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending == nil && !w.done {
		w.pending = time.AfterFunc(w.delay, w.flush)
	}
}

func (w *batchingWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending != nil && !w.done {
		w.pending = nil
		w.flusher.Flush()
	}
}

// finish flushes what waits, and stops the writer: a timer that fires later does nothing.
func (w *batchingWriter) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending != nil {
		w.pending.Stop()
		w.pending = nil
		w.flusher.Flush()
	}
	w.done = true
}

// Unwrap gives http.ResponseController the ResponseWriter underneath.
func (w *batchingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
