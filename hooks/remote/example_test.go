package remote_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"

	hooksv1 "github.com/agentd/agentd/gen/agentd/hooks/v1"
	"github.com/agentd/agentd/hooks/remote"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// noShell is a hook server. It is written in Go here; any language with gRPC stubs for
// agentd.hooks.v1.HookService will do.
type noShell struct {
	hooksv1.UnimplementedHookServiceServer
}

func (noShell) BeforeTool(_ context.Context, req *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
	if req.GetToolName() == "shell" {
		return &hooksv1.BeforeToolResponse{Decision: hooksv1.Decision_DECISION_DENY, Reason: "no shell in production"}, nil
	}
	return &hooksv1.BeforeToolResponse{}, nil // DECISION_CONTINUE
}

func Example() {
	// The hook server, listening where the operator's configuration points.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	hooksv1.RegisterHookServiceServer(srv, noShell{})
	go srv.Serve(lis)
	defer srv.Stop()

	// agentd's side: the hook, called at BeforeTool only, stopping runs when the server
	// does not answer within a second.
	hook, err := remote.Dial(lis.Addr().String(),
		remote.WithPoints(remote.BeforeTool),
		remote.WithTimeout(time.Second),
		remote.WithFailClosed(true))
	if err != nil {
		panic(err)
	}
	defer hook.Close()

	model := &rt.Model{Steps: []rt.Step{rt.Call(0, "shell", `{"cmd":"rm -rf /"}`), rt.Say("I may not do that.")}}
	agent, err := runtime.New(runtime.Config{Model: model, Tools: []runtime.Tool{rt.Tool("shell", rt.Echo)}, Hooks: hook})
	if err != nil {
		panic(err)
	}
	req := &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("clean up")}}
	for ev, err := range agent.Run(context.Background(), req) {
		if err != nil {
			panic(err)
		}
		switch ev := ev.(type) {
		case *runtime.ToolCallResult:
			fmt.Println("result:", ev.Result.Output.String())
		case *runtime.RunFinished:
			fmt.Println(ev.Reason, "-", ev.FinalText)
		}
	}
	// Output:
	// result: tool shell was denied: no shell in production
	// completed - I may not do that.
}

func ExampleParsePoint() {
	// Points as an operator writes them in a configuration file.
	var points []remote.Point
	for _, name := range strings.Split("before_tool,after_tool,after_run", ",") {
		p, err := remote.ParsePoint(name)
		if err != nil {
			panic(err)
		}
		points = append(points, p)
	}
	fmt.Println(points)
	_ = remote.WithPoints(points...)
	// Output:
	// [BeforeTool AfterTool AfterRun]
}

func ExampleWithTLS() {
	// The CA that signed the hook server's certificate, and the certificate agentd
	// presents to a server that asks for one (mTLS).
	caPEM, err := os.ReadFile("/etc/agentd/hooks-ca.pem")
	if err != nil {
		panic(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		panic("no CA certificate in /etc/agentd/hooks-ca.pem")
	}
	cert, err := tls.LoadX509KeyPair("/etc/agentd/hooks-client.pem", "/etc/agentd/hooks-client-key.pem")
	if err != nil {
		panic(err)
	}
	hook, err := remote.Dial("dns:///policy.internal:7070",
		remote.WithTLS(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}),
		remote.WithFailClosed(true)) // a policy that cannot be asked lets nothing through
	if err != nil {
		panic(err)
	}
	defer hook.Close()
}
