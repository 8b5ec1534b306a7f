// Command go-client is a Go client of agentd, on the generated stubs in gen/agentd/v1: it
// runs an agent on a prompt over one Run stream, prints the answer as the model writes
// it, and answers each approval the run asks (y or n on stdin, or all approved with
// --approve).
//
//	go run ./cmd/agentd &                             # the demo agent on localhost:50051
//	go run ./examples/go "what is 12*7?"
//	go run ./examples/go "save a note: buy milk"      # asks: approve save_note …? [y/n]
//
// AGENTD_ADDR and AGENTD_TOKEN (a bearer token, for an agentd with --auth-tokens-file)
// are read from the environment.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// config is what one run of the client does.
type config struct {
	addr, token, agent, prompt string
	approve                    bool // approve every call without asking
}

func main() {
	c := config{addr: os.Getenv("AGENTD_ADDR"), token: os.Getenv("AGENTD_TOKEN")}
	if c.addr == "" {
		c.addr = "localhost:50051"
	}
	flag.StringVar(&c.addr, "addr", c.addr, "host:port of agentd (plain text)")
	flag.StringVar(&c.agent, "agent", "", "agent to run (default: the server's default agent)")
	flag.BoolVar(&c.approve, "approve", false, "approve every call the run asks about, without asking")
	flag.Parse()
	c.prompt = strings.Join(flag.Args(), " ")
	if c.prompt == "" {
		fmt.Fprintln(os.Stderr, "usage: go-client [--addr host:port] [--agent name] [--approve] PROMPT")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "go-client:", err)
		os.Exit(1)
	}
}

// run runs the agent on c.prompt, printing to out and reading approval answers from in.
func run(ctx context.Context, c config, in io.Reader, out io.Writer) error {
	conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	if c.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.token)
	}
	stream, err := agentdv1.NewAgentServiceClient(conn).Run(ctx)
	if err != nil {
		return err
	}
	// Every message a client sends on the stream carries the next client_seq; acks name it.
	seq := int64(1)
	if err := stream.Send(&agentdv1.RunRequest{ClientSeq: seq, Kind: &agentdv1.RunRequest_Start{Start: &agentdv1.RunSpec{
		Agent: c.agent, Input: c.prompt,
	}}}); err != nil {
		return err
	}
	answers := bufio.NewScanner(in)
	for {
		resp, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("the stream ended before run_finished: %w", err)
		}
		switch k := resp.GetEvent().GetKind().(type) {
		case *agentdv1.RunEvent_TextDelta:
			// Append, never count: a client behind gets several deltas merged into one.
			fmt.Fprint(out, k.TextDelta.GetDelta())
		case *agentdv1.RunEvent_ToolCallArgsDone:
			fmt.Fprintf(out, "\n[call %s]\n", k.ToolCallArgsDone.GetArgumentsJson())
		case *agentdv1.RunEvent_ToolCallResult:
			r := k.ToolCallResult
			fmt.Fprintf(out, "[%s → %s%s]\n", r.GetName(), r.GetText(), r.GetJson())
		case *agentdv1.RunEvent_ApprovalRequested:
			a := k.ApprovalRequested
			d := &agentdv1.ApprovalDecision{ApprovalId: a.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}
			if !c.approve {
				fmt.Fprintf(out, "approve %s %s? [y/n] ", a.GetToolName(), a.GetArgumentsJson())
				if !answers.Scan() || !strings.HasPrefix(strings.ToLower(strings.TrimSpace(answers.Text())), "y") {
					d.Outcome, d.Reason = agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_DENIED, "the user said no"
				}
			}
			seq++
			if err := stream.Send(&agentdv1.RunRequest{ClientSeq: seq, Kind: &agentdv1.RunRequest_ApprovalDecision{ApprovalDecision: d}}); err != nil {
				return err
			}
		case *agentdv1.RunEvent_InputAck:
			if e := k.InputAck.GetError(); e != nil {
				fmt.Fprintf(out, "\n[refused: %s %s]\n", e.GetReason(), e.GetMessage())
			}
		case *agentdv1.RunEvent_RunFinished:
			f := k.RunFinished
			fmt.Fprintf(out, "\n[%s]\n", strings.TrimPrefix(f.GetReason().String(), "RUN_END_REASON_"))
			_ = stream.CloseSend()
			if f.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED {
				return errors.New("the run ended " + f.GetReason().String() + ": " + f.GetError().GetMessage())
			}
			return nil
		}
	}
}
