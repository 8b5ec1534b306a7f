package hooks_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/agentd/agentd/hooks"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// orderKey is the Metadata key under which a run collects the names of the hooks whose
// BeforeRun it reached, in order.
const orderKey = "order"

// namedHook appends its name to the run's order at BeforeRun.
type namedHook struct {
	runtime.NoHooks
	name string
}

func (h namedHook) BeforeRun(_ context.Context, in *runtime.RunInfo) error {
	order := in.Metadata[orderKey].(*[]string)
	*order = append(*order, h.name)
	return nil
}

// testServer answers both methods with "<hooks in the context> | <hooks in the order a
// real run reached them>", each a space-separated list of names.
type testServer struct{ agent *runtime.Agent }

func (s *testServer) answer(t *testing.T, ctx context.Context) string {
	var carried []string
	for _, h := range hooks.FromContext(ctx) {
		carried = append(carried, h.(namedHook).name)
	}
	order := &[]string{}
	req := &runtime.Request{
		Messages: []runtime.Message{runtime.UserMessage("hi")},
		Hooks:    runtime.Chain(nil, hooks.FromContext(ctx)...),
		Metadata: map[string]any{orderKey: order},
	}
	for _, err := range s.agent.Run(ctx, req) {
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	return strings.Join(carried, " ") + " | " + strings.Join(*order, " ")
}

func testDesc(t *testing.T) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "agentd.hookstest.Test",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Unary",
			Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
				in := new(emptypb.Empty)
				if err := dec(in); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, _ any) (any, error) {
					return wrapperspb.String(srv.(*testServer).answer(t, ctx)), nil
				}
				if ic == nil {
					return h(ctx, in)
				}
				return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/agentd.hookstest.Test/Unary"}, h)
			},
		}},
		Streams: []grpc.StreamDesc{{
			StreamName:    "Stream",
			ServerStreams: true,
			Handler: func(srv any, stream grpc.ServerStream) error {
				if err := stream.RecvMsg(new(emptypb.Empty)); err != nil {
					return err
				}
				return stream.SendMsg(wrapperspb.String(srv.(*testServer).answer(t, stream.Context())))
			},
		}},
	}
}

// otherStream stands for another middleware's stream wrapper between ours.
type otherStream struct{ grpc.ServerStream }

func otherStreamInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, otherStream{ss})
}

// serve starts a grpc.Server over bufconn with opts and returns a connection to it.
func serve(t *testing.T, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	m := &rt.Model{Steps: []rt.Step{rt.Say("ok"), rt.Say("ok")}}
	agent, err := runtime.New(runtime.Config{Name: "test", Model: m, Hooks: namedHook{name: "agent"}})
	if err != nil {
		t.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(opts...)
	srv.RegisterService(testDesc(t), &testServer{agent: agent})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return conn
}

func TestStreamServerInterceptor_FirstInstalledRunsFirstThenTheAgentsHooks(t *testing.T) {
	conn := serve(t, grpc.ChainStreamInterceptor(
		hooks.StreamServerInterceptor(namedHook{name: "first"}),
		otherStreamInterceptor,
		hooks.StreamServerInterceptor(namedHook{name: "second"}),
		hooks.StreamServerInterceptor(nil), // installs nothing
		hooks.StreamServerInterceptor(namedHook{name: "third"}),
	))
	stream, err := conn.NewStream(t.Context(), &grpc.StreamDesc{ServerStreams: true}, "/agentd.hookstest.Test/Stream")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(&emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	got := new(wrapperspb.StringValue)
	if err := stream.RecvMsg(got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("first second third | first second third agent", got.Value); diff != "" {
		t.Errorf("carried | ran (-want +got):\n%s", diff)
	}
}

func TestUnaryServerInterceptor_FirstInstalledRunsFirstThenTheAgentsHooks(t *testing.T) {
	conn := serve(t, grpc.ChainUnaryInterceptor(
		hooks.UnaryServerInterceptor(namedHook{name: "first"}),
		hooks.UnaryServerInterceptor(namedHook{name: "second"}),
		hooks.UnaryServerInterceptor(nil),
		hooks.UnaryServerInterceptor(namedHook{name: "third"}),
	))
	got := new(wrapperspb.StringValue)
	if err := conn.Invoke(t.Context(), "/agentd.hookstest.Test/Unary", &emptypb.Empty{}, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("first second third | first second third agent", got.Value); diff != "" {
		t.Errorf("carried | ran (-want +got):\n%s", diff)
	}
}

func TestInterceptors_EachRPCGetsItsOwnList(t *testing.T) {
	conn := serve(t,
		grpc.ChainUnaryInterceptor(hooks.UnaryServerInterceptor(namedHook{name: "u"})),
		grpc.ChainStreamInterceptor(hooks.StreamServerInterceptor(namedHook{name: "s"})),
	)
	for range 2 {
		got := new(wrapperspb.StringValue)
		if err := conn.Invoke(t.Context(), "/agentd.hookstest.Test/Unary", &emptypb.Empty{}, got); err != nil {
			t.Fatal(err)
		}
		if got.Value != "u | u agent" {
			t.Errorf("got %q, want the unary interceptor's hook alone, once", got.Value)
		}
	}
}

func TestNewContext_SiblingsDoNotShareHooks(t *testing.T) {
	names := func(ctx context.Context) string {
		var s []string
		for _, h := range hooks.FromContext(ctx) {
			s = append(s, h.(namedHook).name)
		}
		return strings.Join(s, " ")
	}
	parent := hooks.NewContext(context.Background(), namedHook{name: "a"}, nil)
	left := hooks.NewContext(parent, namedHook{name: "b"})
	right := hooks.NewContext(parent, namedHook{name: "c"}, namedHook{name: "d"})
	hooks.FromContext(left)[0] = namedHook{name: "changed"} // a copy
	for _, tc := range []struct {
		ctx  context.Context
		want string
	}{
		{context.Background(), ""},
		{parent, "a"},
		{left, "a b"},
		{right, "a c d"},
		{hooks.NewContext(right), "a c d"},
	} {
		if got := names(tc.ctx); got != tc.want {
			t.Errorf("hooks %q, want %q", got, tc.want)
		}
	}
}
