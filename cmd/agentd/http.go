package main

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/cors"
	"connectrpc.com/vanguard"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	rscors "github.com/rs/cors"
	"golang.org/x/sync/semaphore"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service"
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

// httpHandler returns what the HTTP listener serves: gs's services through vanguard, the
// console for every other path, and CORS for the origins of --http-cors-origins (none by
// default: browsers then reach agentd only from the console's own origin), behind
// guardBrowsers. loopback says the listener is on a loopback address.
func httpHandler(gs *grpc.Server, cfg config) (http.Handler, error) {
	maxMessage := httpMaxMessageBytes(cfg)
	var services []*vanguard.Service
	for name := range gs.GetServiceInfo() {
		services = append(services, vanguard.NewService(name, refuseHandler(gs)))
	}
	tc, err := vanguard.NewTranscoder(services,
		// What vanguardgrpc.NewTranscoder sets, with refuseHandler before gs.
		vanguard.WithDefaultServiceOptions(
			vanguard.WithTargetCodecs(vanguard.CodecProto),
			vanguard.WithTargetProtocols(vanguard.ProtocolGRPC),
			vanguard.WithMaxMessageBufferBytes(maxMessage),
		),
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
		vanguard.WithCompression(vanguard.CompressionGzip,
			func() connect.Compressor { return gzip.NewWriter(io.Discard) },
			func() connect.Decompressor { return &boundedGzip{limit: int64(maxMessage)} }),
		vanguard.WithRules(plainJSONRules(gs)...),
		vanguard.WithUnknownHandler(console.Handler()),
	)
	if err != nil {
		return nil, fmt.Errorf("--http-listen: %w", err)
	}
	bodies := &httpBodies{
		maxMessage:   int64(maxMessage),
		firstMessage: firstMessageTimeout(cfg.startTimeout),
		needsToken:   rpcNeedsToken(gs),
		gate:         semaphore.NewWeighted(transcodeBytes(cfg)),
	}
	if cfg.authTokensFile != "" {
		tokens, err := loadTokens(cfg.authTokensFile)
		if err != nil {
			return nil, err
		}
		bodies.authn = &authenticator{tokens: tokens}
	}
	origins := corsOrigins(cfg.httpCORSOrigins)
	var hosts *allowedHosts
	if cfg.authTokensFile == "" && cfg.clientCA == "" {
		hosts = newAllowedHosts(cfg.httpListen, cfg.httpAllowedHosts)
	}
	h := guardBrowsers(bodies.wrap(batchFlushes(tc, httpFlushDelay)), origins, hosts)
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

// rpcNeedsToken returns whether a request for path calls an RPC of gs that needs a token
// (all but health and reflection, as on the gRPC listener).
func rpcNeedsToken(gs *grpc.Server) func(path string) bool {
	info := gs.GetServiceInfo()
	return func(path string) bool {
		svc, _, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
		if _, known := info[svc]; !ok || !known {
			return false // the console, or no RPC at all
		}
		c := interceptors.CallMeta{Service: svc}
		return !isHealth(c) && !isReflection(c)
	}
}

// jsonCodec is vanguard's JSON codec, except that JSON it cannot decode is the client's
// error, INVALID_ARGUMENT (HTTP 400) with protojson's message, not INTERNAL.
type jsonCodec struct{ *vanguard.JSONCodec }

func (c jsonCodec) Unmarshal(data []byte, msg proto.Message) error {
	err := c.JSONCodec.Unmarshal(data, msg)
	if rr, ok := msg.(*agentdv1.RunRequest); ok && err != nil {
		// A Run stream's message: the service refuses it in an ack and the run goes on.
		// Refused here, it would end the stream from the goroutine reading the body,
		// racing the handler's writes (inside vanguard).
		service.MarkUndecodable(rr, "invalid JSON message: "+err.Error())
		return nil
	}
	return invalidJSON(err)
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
	if cfg.httpListen == "" && cfg.httpAllowedHosts != "" {
		errs = append(errs, errors.New("--http-allowed-hosts needs --http-listen"))
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
	tlsCfg, err := serverTLS(cfg)
	if err != nil {
		return nil, nil, err
	}
	lis, err := net.Listen("tcp", cfg.httpListen)
	if err != nil {
		return nil, nil, fmt.Errorf("--http-listen: %w", err)
	}
	h, err := httpHandler(gs, cfg)
	if err != nil {
		lis.Close()
		return nil, nil, err
	}
	return newHTTPServer(h, cfg, tlsCfg, log), lis, nil
}

// guardBrowsers refuses what a web page of another site could make a browser send:
//   - a request whose Origin is neither the request's own (the console's) nor one of
//     origins (--http-cors-origins; "*" allows any): 403;
//   - a POST (or any other method but GET, HEAD and OPTIONS) whose Content-Type is not
//     one of the RPC protocols' (JSON, protobuf, Connect, gRPC, gRPC-Web): 415. A page may
//     POST a form, text or no body type to any site without asking; the protocols' types
//     need a CORS preflight, which only origins allow;
//   - with hosts (the listener has no auth), a request for a Host that hosts does not
//     allow: 403. A site whose name a resolver points at agentd's address (DNS
//     rebinding) is then not served as if it were agentd's own page.
//
// curl and other clients that are not browsers send no Origin, and are not affected.
func guardBrowsers(h http.Handler, origins []string, hosts *allowedHosts) http.Handler {
	anyOrigin := slices.Contains(origins, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hosts != nil && !hosts.allows(r.Host) {
			http.Error(w, fmt.Sprintf("agentd's HTTP listener has no auth: it serves requests for localhost, an IP address, this machine's name or a name of --http-allowed-hosts, not for %q (a page of another site could reach it by that name); add the name to --http-allowed-hosts, or set --auth-tokens-file", r.Host), http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !anyOrigin && !slices.Contains(origins, o) && !sameOrigin(o, r.Host) {
			http.Error(w, fmt.Sprintf("a page of %s may not call agentd: list its origin in --http-cors-origins", o), http.StatusForbidden)
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if !rpcContentType(r.Header.Get("Content-Type")) {
				http.Error(w, fmt.Sprintf("Content-Type %q is not an RPC protocol's: agentd takes application/json (plain JSON), application/proto, application/connect+json or +proto, application/grpc and application/grpc-web", r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// allowedHosts are the Host names an HTTP listener without auth serves: localhost and
// names under .localhost, every IP address (a page served from an address is of that
// address's origin, which no other site can take), this machine's host name, the host
// of --http-listen, and the names of --http-allowed-hosts: a name, ".example.com" for it
// and every name under it, or * for any. It is safe for concurrent use.
type allowedHosts struct {
	any      bool
	names    map[string]bool
	suffixes []string
}

// newAllowedHosts returns the hosts a listener on listen, with the list extra (comma
// separated), allows.
func newAllowedHosts(listen, extra string) *allowedHosts {
	a := &allowedHosts{names: map[string]bool{}}
	add := func(name string) {
		name = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
		switch {
		case name == "":
		case name == "*":
			a.any = true
		case strings.HasPrefix(name, "*."):
			a.suffixes = append(a.suffixes, name[1:])
		case strings.HasPrefix(name, "."):
			a.names[name[1:]] = true
			a.suffixes = append(a.suffixes, name)
		default:
			a.names[name] = true
		}
	}
	if host, _, err := net.SplitHostPort(listen); err == nil {
		add(host)
	}
	if h, err := os.Hostname(); err == nil {
		add(h)
	}
	for name := range strings.SplitSeq(extra, ",") {
		add(name)
	}
	return a
}

// allows reports whether a request for hostport (its Host header) is served.
func (a *allowedHosts) allows(hostport string) bool {
	if a.any || isLoopbackHost(hostport) {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if net.ParseIP(strings.Trim(host, "[]")) != nil || a.names[host] {
		return true
	}
	for _, s := range a.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// sameOrigin reports whether origin (scheme://host[:port]) names host, the request's
// Host: a page agentd served itself.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

// isLoopbackHost reports whether a Host header names this machine: localhost (or a name
// under .localhost) or a loopback IP, with or without a port.
func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// rpcContentType reports whether ct is the content type of an RPC protocol agentd serves.
func rpcContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch {
	case mt == "application/json", mt == "application/proto", mt == "application/protobuf", mt == "application/x-protobuf":
		return true
	case strings.HasPrefix(mt, "application/connect+"), mt == "application/grpc", strings.HasPrefix(mt, "application/grpc+"),
		mt == "application/grpc-web", strings.HasPrefix(mt, "application/grpc-web+"), strings.HasPrefix(mt, "application/grpc-web-text"):
		return true
	}
	return false
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
// delay after the first one not yet carried out, together with those after it, and at the
// latest when the handler returns.
func batchFlushes(h http.Handler, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		if !ok {
			h.ServeHTTP(w, r)
			return
		}
		bw := &batchingWriter{ResponseWriter: w, flusher: f, delay: delay, header: w.Header().Clone()}
		defer bw.finish()
		h.ServeHTTP(bw, r)
	})
}

// batchingWriter is a ResponseWriter whose flushes are batched (batchFlushes). A batch is
// flushed on a timer's goroutine, so mu serialises the flush with the handler's writes: a
// ResponseWriter is not safe for concurrent use. The handler gets a header map of the
// writer's own, which it may change whenever it likes (gRPC and vanguard set trailers in
// it as the response ends, with no lock): it is copied into the ResponseWriter's own, under
// mu, as the header is written and as the handler returns (the trailers), and nowhere else.
// An HTTP/2 flush reads the ResponseWriter's map (for its trailers), which is why the
// handler must not touch that one while a flush may run.
type batchingWriter struct {
	http.ResponseWriter
	flusher http.Flusher
	delay   time.Duration
	header  http.Header // the handler's

	mu          sync.Mutex
	wroteHeader bool
	pending     *time.Timer // set while a flush waits
	done        bool        // the handler returned: the ResponseWriter is not to be used
}

func (w *batchingWriter) Header() http.Header { return w.header }

func (w *batchingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.wroteHeader {
		w.writeHeaderLocked(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *batchingWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.wroteHeader {
		w.writeHeaderLocked(code)
	}
}

func (w *batchingWriter) writeHeaderLocked(code int) {
	w.copyHeaderLocked()
	w.ResponseWriter.WriteHeader(code)
	w.wroteHeader = true
}

// copyHeaderLocked makes the ResponseWriter's header map what the handler's says.
func (w *batchingWriter) copyHeaderLocked() {
	dst := w.ResponseWriter.Header()
	for k := range dst {
		if _, ok := w.header[k]; !ok {
			delete(dst, k)
		}
	}
	for k, v := range w.header {
		dst[k] = slices.Clone(v)
	}
}

// Flush schedules a flush, unless one is already scheduled.
func (w *batchingWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.wroteHeader {
		w.writeHeaderLocked(http.StatusOK)
	}
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

// finish hands the ResponseWriter what the handler left in its header map (trailers),
// flushes what waits, and stops the writer: a timer that fires later does nothing.
func (w *batchingWriter) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.copyHeaderLocked() // net/http writes it, if the handler did not
	if w.pending != nil {
		w.pending.Stop()
		w.pending = nil
		w.flusher.Flush()
	}
	w.done = true
}

// Unwrap gives http.ResponseController the ResponseWriter underneath.
func (w *batchingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
