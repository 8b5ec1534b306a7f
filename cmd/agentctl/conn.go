package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// dial returns a client of agentd at c.addr. The connection is made lazily, at the first
// call; close ends it.
func dial(c connConfig) (client agentdv1.AgentServiceClient, close func(), err error) {
	creds := insecure.NewCredentials()
	if !c.plaintext {
		cfg, err := clientTLS(c)
		if err != nil {
			return nil, nil, err
		}
		creds = credentials.NewTLS(cfg)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if c.authority != "" {
		opts = append(opts, grpc.WithAuthority(c.authority))
	}
	conn, err := grpc.NewClient(c.addr, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("--addr %s: %w", c.addr, err)
	}
	return agentdv1.NewAgentServiceClient(conn), func() { _ = conn.Close() }, nil
}

// clientTLS builds the TLS configuration the connection flags describe.
func clientTLS(c connConfig) (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.servername,
		InsecureSkipVerify: c.insecure, //nolint:gosec // asked for with --insecure, as in grpcurl
	}
	if c.cacert != "" {
		pem, err := os.ReadFile(c.cacert)
		if err != nil {
			return nil, fmt.Errorf("--cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert %s: no PEM certificates in it", c.cacert)
		}
		cfg.RootCAs = pool
	}
	if c.cert != "" {
		pair, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			return nil, fmt.Errorf("--cert/--key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// outgoingHeaders puts the -H metadata on ctx, expanding ${NAME} from the environment
// when --expand-headers says so.
func outgoingHeaders(ctx context.Context, c connConfig, getenv func(string) string) (context.Context, error) {
	if len(c.headers) == 0 {
		return ctx, nil
	}
	md := metadata.MD{}
	var missing []string
	for _, h := range c.headers {
		name, value, err := parseHeader(h)
		if err != nil {
			return ctx, err
		}
		if c.expandHeaders {
			value = os.Expand(value, func(k string) string {
				v := getenv(k)
				if v == "" {
					missing = append(missing, k)
				}
				return v
			})
		}
		md.Append(name, value)
	}
	if len(missing) > 0 {
		return ctx, fmt.Errorf("--expand-headers: %s not set in the environment", strings.Join(missing, ", "))
	}
	return metadata.NewOutgoingContext(ctx, md), nil
}

// describeErr turns an RPC error into a line for a person: code, agentd's reason, message,
// and a hint where a flag would fix it.
func (e env) describeErr(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	if cause := dialFailure(st); cause != "" {
		return e.noServer(cause)
	}
	msg := st.Code().String()
	ei := errorInfo(st)
	if ei.GetReason() != "" {
		msg += " (" + ei.GetReason() + ")"
	}
	msg += ": " + st.Message()
	md := ei.GetMetadata()
	switch {
	case ei.GetReason() == "THREAD_BUSY" && md["active_run_id"] != "":
		msg += fmt.Sprintf("\n  the thread's run %s is going on: follow it with %s, or wait for it to finish", md["active_run_id"], e.command("attach", md["active_run_id"]))
	case ei.GetReason() == "EVENTS_EXPIRED" && md["oldest_seq"] != "":
		if oldest, err := strconv.ParseInt(md["oldest_seq"], 10, 64); err == nil && oldest > 0 {
			msg += fmt.Sprintf("\n  the run's events are kept from seq %d on: attach with --after %d", oldest, oldest-1)
		}
	case strings.Contains(st.Message(), "first record does not look like a TLS handshake"):
		msg += "\n  the server does not speak TLS: add --plaintext"
	case st.Code() == codes.Unavailable && strings.Contains(st.Message(), "tls:"):
		msg += "\n  the TLS handshake failed: check --cacert, --servername, or --insecure to skip verification"
	case st.Code() == codes.Unauthenticated:
		msg += "\n  send a token with -H 'authorization: Bearer <token>'"
	}
	return msg
}

// noAddress is dialFailure's cause for a host name that resolves to no address.
const noAddress = "no address for the host name"

// dialFailure returns why no connection to agentd could be made, when st says that
// ("connection refused", "i/o timeout", noAddress), or "": gRPC reports it as
// UNAVAILABLE, with the dialer's error last in the message.
func dialFailure(st *status.Status) string {
	msg := st.Message()
	switch {
	case st.Code() != codes.Unavailable:
		return ""
	case strings.Contains(msg, "name resolver error"):
		return noAddress
	case !strings.Contains(msg, "Error while dialing"):
		return ""
	}
	msg = strings.TrimSuffix(msg, `"`)
	return msg[strings.LastIndex(msg, ": ")+2:]
}

// noServer describes a connection to agentd that could not be made for cause, with
// what would make one.
func (e env) noServer(cause string) string {
	msg := fmt.Sprintf("no agentd answers at %s (%s)", e.addr, cause)
	local := connConfig{addr: e.addr}.plaintextByDefault()
	switch {
	case local && cause == "connection refused":
		return msg + "\n  start one with: go run ./cmd/agentd (in agentd's source tree), or point --addr (or AGENTCTL_ADDR) at one that runs"
	case cause == noAddress:
		return msg + "\n  check the host name in --addr (or AGENTCTL_ADDR)"
	}
	return msg + "\n  is agentd running there, and can this machine reach it? Check --addr (or AGENTCTL_ADDR)"
}

// errorInfo returns the ErrorInfo of agentd's status st, or nil.
func errorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei
		}
	}
	return nil
}

// streamLost reports whether err, ending a run's stream after it opened and before
// run_finished, is the loss of the stream rather than agentd's answer about the run: the
// connection broke or agentd could not send (UNAVAILABLE, with no reason or
// STREAM_BROKEN), --max-time passed (DEADLINE_EXCEEDED with no reason), or agentd let a
// client that read too slowly go (CLIENT_STALLED). The run goes on on the server then, so
// it can be followed again; a status that names a run's failure does not say that.
func streamLost(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	reason := errorInfo(st).GetReason()
	switch st.Code() {
	case codes.Unavailable:
		return reason == "" || reason == "STREAM_BROKEN"
	case codes.DeadlineExceeded:
		return reason == ""
	case codes.ResourceExhausted:
		return reason == "CLIENT_STALLED"
	}
	return false
}

// isCanceled reports whether err is the end of a call agentctl cancelled itself.
func isCanceled(err error) bool {
	return errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled
}
