package agents

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/agentd/agentd/hooks/audit"
	"github.com/agentd/agentd/hooks/budget"
	"github.com/agentd/agentd/hooks/errorbreaker"
	"github.com/agentd/agentd/hooks/loopdetect"
	"github.com/agentd/agentd/hooks/remote"
	"github.com/agentd/agentd/runtime"
)

// HooksConfig enables and tunes an agent's own hooks (runtime.Config.Hooks). A run's
// hooks are the server-wide ones first, those the server's gRPC interceptors install
// (agentd's --audit among them), then these, in this order: loopdetect, budget,
// errorbreaker, the remote hooks in the order listed, and audit, which records what every
// hook of the run decided wherever it sits.
type HooksConfig struct {
	// LoopDetect warns the model, and then stops the run, when it calls the same tool
	// with the same arguments again and again.
	LoopDetect *LoopDetectConfig `yaml:"loopdetect,omitempty"`
	// Budget stops a run past a token, tool-call or wall-time budget.
	Budget *BudgetConfig `yaml:"budget,omitempty"`
	// ErrorBreaker stops a run after consecutive failed tool calls.
	ErrorBreaker *ErrorBreakerConfig `yaml:"errorbreaker,omitempty"`
	// Audit logs one record per tool call and per decision.
	Audit *AuditConfig `yaml:"audit,omitempty"`
	// Remote are hooks served by agentd.hooks.v1.HookService at the given addresses.
	Remote []RemoteHookConfig `yaml:"remote,omitempty"`
	// Guardrails check the run's input, its answer, and tool calls' arguments and
	// results, and stop the run (or refuse the call) when they trip; see
	// GuardrailConfig. They follow the remote hooks in the agent's chain.
	Guardrails []GuardrailConfig `yaml:"guardrails,omitempty"`
}

// LoopDetectConfig tunes loopdetect; zero limits take its defaults (3 and 5).
type LoopDetectConfig struct {
	SoftLimit int `yaml:"soft_limit,omitempty"`
	HardLimit int `yaml:"hard_limit,omitempty"`
}

// BudgetConfig sets a run's budgets; zero means no budget of that kind.
type BudgetConfig struct {
	MaxTokens    int64    `yaml:"max_tokens,omitempty"`
	MaxToolCalls int64    `yaml:"max_tool_calls,omitempty"`
	MaxDuration  Duration `yaml:"max_duration,omitempty"`
}

// ErrorBreakerConfig tunes errorbreaker; a zero threshold takes its default (5).
type ErrorBreakerConfig struct {
	Threshold int `yaml:"threshold,omitempty"`
}

// AuditConfig tunes audit. Arguments and outputs are redacted unless set.
type AuditConfig struct {
	Arguments bool `yaml:"arguments,omitempty"`
	Outputs   bool `yaml:"outputs,omitempty"`
}

// RemoteHookConfig names a remote hook.
type RemoteHookConfig struct {
	// Address of the HookService: a gRPC target such as host:port,
	// dns:///hooks.internal:7070 or unix:///run/agentd/hook.sock. On a loopback address
	// or a Unix socket the connection is plaintext unless TLS is set; any other address
	// needs TLS, or Plaintext to say that its network is trusted otherwise.
	Address string `yaml:"address"`
	// Points are the hook points called: before_run, before_model, after_model,
	// before_tool, after_tool, after_run. Empty means before_tool and after_tool.
	Points []string `yaml:"points,omitempty"`
	// Timeout bounds each call; zero means 2s.
	Timeout Duration `yaml:"timeout,omitempty"`
	// FailClosed stops the run when the hook cannot answer (down, too slow, or its
	// certificate does not verify); by default the run goes on. A hook that denies
	// calls wants it: a policy that is down must not let calls through.
	FailClosed bool `yaml:"fail_closed,omitempty"`
	// TLS connects over TLS; tls: {} verifies the server against the system's CAs.
	TLS *RemoteHookTLSConfig `yaml:"tls,omitempty"`
	// Plaintext allows a connection without TLS to an address that is neither on
	// loopback nor a Unix socket, for a network that protects it otherwise (a service
	// mesh's mTLS, a private link). Calls carry tool arguments and outputs, and the
	// hook's answers decide what runs: whoever is on the path reads and forges them.
	Plaintext bool `yaml:"plaintext,omitempty"`
}

// RemoteHookTLSConfig configures TLS to a remote hook. Its files are PEM, read when the
// registry is built (a changed file takes effect when agentd starts again); relative
// paths are from agentd's working directory.
type RemoteHookTLSConfig struct {
	// CAFile holds the CA certificates that verify the server; empty means the
	// system's.
	CAFile string `yaml:"ca_file,omitempty"`
	// CertFile and KeyFile are the client certificate and its key agentd presents to a
	// server that asks for one (mTLS); both or neither.
	CertFile string `yaml:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file,omitempty"`
	// ServerName is the name the server's certificate must hold; empty means the host
	// of Address.
	ServerName string `yaml:"server_name,omitempty"`
}

// load reads the files and returns the client's TLS configuration; errors name the
// field at fault after prefix.
func (c *RemoteHookTLSConfig) load(prefix string) (*tls.Config, error) {
	tc := &tls.Config{ServerName: c.ServerName, MinVersion: tls.VersionTLS12}
	var errs []error
	if c.CAFile != "" {
		pemData, err := os.ReadFile(c.CAFile)
		tc.RootCAs = x509.NewCertPool()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.ca_file: %w", prefix, err))
		} else if !tc.RootCAs.AppendCertsFromPEM(pemData) {
			errs = append(errs, fmt.Errorf("%s.ca_file: %s holds no PEM certificate", prefix, c.CAFile))
		}
	}
	switch {
	case c.CertFile == "" && c.KeyFile == "":
	case c.CertFile == "" || c.KeyFile == "":
		errs = append(errs, fmt.Errorf("%s: cert_file and key_file go together (mTLS): give both or neither", prefix))
	default:
		certPEM, err := os.ReadFile(c.CertFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.cert_file: %w", prefix, err))
		}
		keyPEM, kerr := os.ReadFile(c.KeyFile)
		if kerr != nil {
			errs = append(errs, fmt.Errorf("%s.key_file: %w", prefix, kerr))
		}
		if err == nil && kerr == nil {
			cert, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.cert_file, key_file: %v", prefix, err))
			} else {
				tc.Certificates = []tls.Certificate{cert}
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return tc, nil
}

// remoteOptions are the connection options of a remote hook or guardrail: TLS, or
// plaintext where its configuration says so. Errors name the field after prefix.
func remoteOptions(prefix string, tlsCfg *RemoteHookTLSConfig, plaintext bool) ([]remote.Option, error) {
	switch {
	case tlsCfg != nil && plaintext:
		return nil, fmt.Errorf("%s: tls and plaintext: true exclude each other; keep one", prefix)
	case tlsCfg != nil:
		tc, err := tlsCfg.load(prefix + ".tls")
		if err != nil {
			return nil, err
		}
		return []remote.Option{remote.WithTLS(tc)}, nil
	case plaintext:
		return []remote.Option{remote.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))}, nil
	}
	return nil, nil
}

// dialError explains why a remote hook or guardrail at address could not be set up.
func dialError(prefix, address string, err error) error {
	if errors.Is(err, remote.ErrPlaintext) {
		return fmt.Errorf("%s.address: %s is neither on loopback nor a Unix socket, and calls to it would be plaintext: "+
			"set tls (tls: {} trusts the system's CAs; ca_file for a private CA, cert_file and key_file for mTLS), "+
			"or plaintext: true if its network is protected otherwise", prefix, address)
	}
	return fmt.Errorf("%s: %v", prefix, err)
}

// build makes the agent's hooks. The returned closers release remote connections.
func (h HooksConfig) build(log *slog.Logger) (runtime.Hooks, []func() error, error) {
	var hs []runtime.Hooks
	var closers []func() error
	if c := h.LoopDetect; c != nil {
		var opts []loopdetect.Option
		if c.SoftLimit != 0 {
			opts = append(opts, loopdetect.WithSoftLimit(c.SoftLimit))
		}
		if c.HardLimit != 0 {
			opts = append(opts, loopdetect.WithHardLimit(c.HardLimit))
		}
		hs = append(hs, loopdetect.New(opts...))
	}
	if c := h.Budget; c != nil {
		hs = append(hs, budget.New(budget.WithMaxTokens(c.MaxTokens), budget.WithMaxToolCalls(c.MaxToolCalls), budget.WithMaxDuration(time.Duration(c.MaxDuration))))
	}
	if c := h.ErrorBreaker; c != nil {
		var opts []errorbreaker.Option
		if c.Threshold != 0 {
			opts = append(opts, errorbreaker.WithThreshold(c.Threshold))
		}
		hs = append(hs, errorbreaker.New(opts...))
	}
	var errs []error
	for i, c := range h.Remote {
		if c.Address == "" {
			errs = append(errs, fmt.Errorf("hooks.remote[%d].address: must be set", i))
			continue
		}
		opts := []remote.Option{remote.WithLogger(log), remote.WithFailClosed(c.FailClosed)}
		if c.Timeout != 0 {
			opts = append(opts, remote.WithTimeout(time.Duration(c.Timeout)))
		}
		if len(c.Points) > 0 {
			var points []remote.Point
			for _, s := range c.Points {
				p, err := remote.ParsePoint(s)
				if err != nil {
					errs = append(errs, fmt.Errorf("hooks.remote[%d].points: %v", i, err))
					continue
				}
				points = append(points, p)
			}
			opts = append(opts, remote.WithPoints(points...))
		}
		prefix := fmt.Sprintf("hooks.remote[%d]", i)
		conn, err := remoteOptions(prefix, c.TLS, c.Plaintext)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rh, err := remote.Dial(c.Address, append(opts, conn...)...)
		if err != nil {
			errs = append(errs, dialError(prefix, c.Address, err))
			continue
		}
		closers = append(closers, rh.Close)
		hs = append(hs, rh)
	}
	gs, gclosers, gerrs := h.buildGuardrails(log)
	hs, closers, errs = append(hs, gs...), append(closers, gclosers...), append(errs, gerrs...)
	if c := h.Audit; c != nil {
		hs = append(hs, audit.New(log, audit.WithArguments(c.Arguments), audit.WithOutputs(c.Outputs)))
	}
	if len(errs) > 0 {
		closeAll(closers)
		return nil, nil, errors.Join(errs...)
	}
	if len(hs) == 0 {
		return nil, nil, nil
	}
	return runtime.Chain(log, hs...), closers, nil
}
