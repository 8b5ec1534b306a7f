//go:build unix

package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// BenchmarkHTTPOverhead measures what the HTTP listener costs over native gRPC: the same
// agentd (workload:medium, every delta an event, so that every protocol carries the same
// events) serves one StartRun at a time, read to its end by a client in the same process,
// natively (grpc) and through the HTTP listener in the Connect protocol (protobuf and
// JSON), gRPC-Web and gRPC. CPU time is the process's (getrusage): server and client
// together, as the README's other figures. cpu-µs/run is the figure to compare; the
// sub-benchmarks run side by side in one process, so their ratios hold on a noisy machine
// where absolute figures do not.
//
//	go test ./cmd/agentd -run '^$' -bench HTTPOverhead -benchtime 200x -count 3
func BenchmarkHTTPOverhead(b *testing.B) {
	srv, base := startServeHTTP(b, []string{"--model", "workload:medium", "--exact-deltas", "--rate-limit", "0", "--max-runs", "64"}, slog.New(slog.DiscardHandler))
	conn := dial(b, srv.addr, nil)
	native := agentdv1.NewAgentServiceClient(conn)
	h1 := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	url := base + "/agentd.v1.AgentService/StartRun"
	req := &agentdv1.StartRunRequest{Start: &agentdv1.RunSpec{Input: "go"}}

	connectRun := func(hc *http.Client, opts ...connect.ClientOption) func(context.Context) (int, error) {
		client := connect.NewClient[agentdv1.StartRunRequest, agentdv1.StartRunResponse](hc, url, opts...)
		return func(ctx context.Context) (int, error) {
			stream, err := client.CallServerStream(ctx, connect.NewRequest(req))
			if err != nil {
				return 0, err
			}
			defer stream.Close()
			n := 0
			for stream.Receive() {
				n++
			}
			return n, stream.Err()
		}
	}
	for _, bm := range []struct {
		name string
		run  func(context.Context) (int, error)
	}{
		{"grpc", func(ctx context.Context) (int, error) {
			stream, err := native.StartRun(ctx, req)
			if err != nil {
				return 0, err
			}
			return drain(stream)
		}},
		{"http/connect+proto", connectRun(h1)},
		{"http/connect+json", connectRun(h1, connect.WithProtoJSON())},
		{"http/grpc-web", connectRun(h1, connect.WithGRPCWeb())},
		{"http/grpc", connectRun(h2cClient(), connect.WithGRPC())},
	} {
		b.Run(bm.name, func(b *testing.B) {
			ctx := b.Context()
			events, err := bm.run(ctx) // one checked run, off the clock
			if err != nil || events < 100 {
				b.Fatalf("a run: %d events, %v", events, err)
			}
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				if _, err := bm.run(ctx); err != nil {
					b.Fatal(err)
				}
			}
			cpu := processCPU() - cpu0
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/run")
			b.ReportMetric(float64(events), "events/run")
		})
	}
}

// drain reads a native stream to its end and counts its messages.
func drain(stream grpc.ServerStreamingClient[agentdv1.StartRunResponse]) (int, error) {
	n := 0
	for {
		if _, err := stream.Recv(); err == io.EOF {
			return n, nil
		} else if err != nil {
			return n, err
		}
		n++
	}
}

// processCPU returns the process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
