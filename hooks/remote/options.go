package remote

import (
	"crypto/tls"
	"log/slog"
	"time"

	"google.golang.org/grpc"
)

// Option configures a [Hook] made by [New] or [Dial], or a [Guardrail] made by
// [NewGuardrail] or [DialGuardrail]; each option says whether a Guardrail heeds it.
type Option func(*options)

type options struct {
	points     Point
	timeout    time.Duration
	failClosed bool
	log        *slog.Logger
	name       string
	dialOpts   []grpc.DialOption
	useTLS     bool
	tls        *tls.Config
}

// DefaultTimeout bounds each call of the hook server unless [WithTimeout] says otherwise.
const DefaultTimeout = 2 * time.Second

func evaluate(opts []Option) options {
	o := options{points: BeforeTool | AfterTool, timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	return o
}

// WithPoints sets the hook points at which the hook server is called, replacing the
// default of [BeforeTool] and [AfterTool]. At any other point the hook does nothing.
// WithPoints() with no points calls the server nowhere. A [Guardrail] ignores it: its
// spec's Stages say where it checks.
func WithPoints(points ...Point) Option {
	return func(o *options) {
		o.points = 0
		for _, p := range points {
			o.points |= p
		}
	}
}

// WithTimeout bounds each call of the hook server, from the moment the hook point is
// reached to the response; a call past it is a failure handled by the fail mode. The
// default is [DefaultTimeout]; d <= 0 keeps it. The run's own context bounds the call too.
// It bounds each of a [Guardrail]'s checks the same way.
func WithTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// WithFailClosed chooses what a failed call does to the run (an error status, a timeout,
// an unreachable server, a response that cannot be applied). With false, the default
// (fail-open), the run goes on as if the hook had allowed everything, and a warning is
// logged. With true (fail-closed), the hook returns a *runtime.StopError and the run
// finishes stopped; at AfterRun, which cannot stop a run, the failure is only logged.
// A [Guardrail] ignores it: it fails closed unless its spec's FailOpen says otherwise.
func WithFailClosed(failClosed bool) Option {
	return func(o *options) { o.failClosed = failClosed }
}

// WithLogger sets the logger that receives failed calls; nil means slog.Default(). Tool
// arguments, messages and outputs are never logged. A [Guardrail] logs only what the
// runtime does not see, such as run metadata left out of a request: the runtime logs its
// failed checks.
func WithLogger(log *slog.Logger) Option {
	return func(o *options) { o.log = log }
}

// WithName names the hook in logs and in the StopError it returns, whose Hook is
// "remote:<name>". The default is the connection's target when it has one
// (a *grpc.ClientConn, or the target given to [Dial]), "remote" otherwise. A
// [Guardrail] uses the name in its logs, and as its spec's Name when that is empty; its
// default is the spec's Name, then the target.
func WithName(name string) Option {
	return func(o *options) { o.name = name }
}

// WithTLS makes [Dial] connect over TLS with cfg: RootCAs to trust a private CA
// (nil: the system's roots), Certificates for a client certificate (mTLS), ServerName
// when the server's certificate names a host other than the target's. A nil cfg means
// TLS with the system's roots. cfg is cloned; the clone gets TLS 1.2 as its minimum
// version unless cfg names one. WithTLS replaces any transport credentials given with
// [WithDialOptions]. [DialGuardrail] heeds it as Dial does; [New] and [NewGuardrail]
// ignore it.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) { o.useTLS, o.tls = true, cfg }
}

// WithDialOptions sets the options [Dial] creates its connection with (transport
// credentials, a stats handler for tracing, keepalives). Given any, Dial adds no
// credentials of its own but those of [WithTLS]: the options must then hold the
// transport credentials, insecure.NewCredentials() among them for plaintext to a
// server whose network is trusted otherwise. [DialGuardrail] heeds them as Dial does;
// [New] and [NewGuardrail] ignore them.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = append(o.dialOpts, opts...) }
}
