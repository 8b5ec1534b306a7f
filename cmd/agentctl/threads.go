package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// threadsPage is how many threads or messages agentctl asks for a page.
const threadsPage = 500

// timeLayout is how agentctl writes a time, in the local zone.
const timeLayout = "2006-01-02 15:04:05"

// runThreads is `agentctl threads`: it lists the caller's threads, shows one's messages, or
// deletes one.
func runThreads(ctx context.Context, client agentdv1.AgentServiceClient, cfg threadsConfig, e env) int {
	ctx, stop := interruptible(ctx, e)
	defer stop()
	var (
		out proto.Message
		err error
	)
	switch cfg.action {
	case "show":
		out, err = getThread(ctx, client, cfg.id)
	case "delete":
		out, err = client.DeleteThread(ctx, &agentdv1.DeleteThreadRequest{ThreadId: cfg.id})
	default:
		out, err = listThreads(ctx, client)
	}
	if err != nil {
		if isCanceled(err) && ctx.Err() != nil {
			return exitCancel
		}
		fmt.Fprintf(e.stderr, "agentctl: threads %s: %s\n", cfg.action, e.describeErr(err))
		return exitFailed
	}
	if cfg.json {
		b, err := protojson.Marshal(out)
		if err != nil {
			fmt.Fprintf(e.stderr, "agentctl: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
		return exitOK
	}
	sc := newScreen(e.stdout, useColor(e), nil)
	switch o := out.(type) {
	case *agentdv1.GetThreadResponse:
		showThread(e, sc, o)
	case *agentdv1.DeleteThreadResponse:
		sc.line("deleted thread " + cfg.id)
	case *agentdv1.ListThreadsResponse:
		showThreads(sc, o.GetThreads())
	}
	return exitOK
}

// interruptible returns ctx cancelled by Ctrl-C, for a call that ends with it; stop
// releases what watches for Ctrl-C.
func interruptible(ctx context.Context, e env) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-e.interrupts:
			cancel()
		case <-done:
		}
	}()
	return ctx, func() {
		close(done)
		<-stopped
		cancel()
	}
}

// listThreads reads every page of the caller's threads into one response.
func listThreads(ctx context.Context, client agentdv1.AgentServiceClient) (*agentdv1.ListThreadsResponse, error) {
	all := &agentdv1.ListThreadsResponse{}
	token := ""
	for {
		resp, err := client.ListThreads(ctx, &agentdv1.ListThreadsRequest{PageSize: threadsPage, PageToken: token})
		if err != nil {
			return nil, err
		}
		all.Threads = append(all.Threads, resp.GetThreads()...)
		if token = resp.GetNextPageToken(); token == "" {
			return all, nil
		}
	}
}

// getThread reads a thread and every page of its messages into one response.
func getThread(ctx context.Context, client agentdv1.AgentServiceClient, id string) (*agentdv1.GetThreadResponse, error) {
	var all *agentdv1.GetThreadResponse
	token := ""
	for {
		resp, err := client.GetThread(ctx, &agentdv1.GetThreadRequest{ThreadId: id, PageSize: threadsPage, PageToken: token})
		if err != nil {
			return nil, err
		}
		if all == nil {
			all = &agentdv1.GetThreadResponse{Thread: resp.GetThread()}
		}
		all.Messages = append(all.Messages, resp.GetMessages()...)
		if token = resp.GetNextPageToken(); token == "" {
			return all, nil
		}
	}
}

// showThreads writes one line a thread, in columns:
//
//	THREAD                  AGENT  MESSAGES  UPDATED              ACTIVE RUN
//	thread_3mrar9q3b937x    demo   4         2025-06-01 10:31:02  -
func showThreads(sc *screen, threads []*agentdv1.Thread) {
	if len(threads) == 0 {
		sc.line("no threads")
		return
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tAGENT\tMESSAGES\tUPDATED\tACTIVE RUN")
	for _, t := range threads {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", t.GetThreadId(), orDash(t.GetAgent()), t.GetMessageCount(), when(t.GetUpdatedAt().AsTime()), orDash(t.GetActiveRunId()))
	}
	_ = tw.Flush()
	sc.write(b.String())
}

// showThread writes a thread's header and its messages: each part of a message on lines
// of its own, the first after the message's role, text whole, and tool calls and results
// on one line each, as `agentctl run` shows them.
//
//	user: what is 12*7?
//	assistant: ⚙ calculate {"expression":"12*7"}
//	tool: → calculate: {"expression":"12*7","result":84}
//	assistant: 12*7 = 84
func showThread(e env, sc *screen, resp *agentdv1.GetThreadResponse) {
	t := resp.GetThread()
	sc.line(sc.dim(fmt.Sprintf("● thread %s · agent %s · %s · created %s · updated %s", t.GetThreadId(), orDash(t.GetAgent()),
		plural(t.GetMessageCount(), "message"), when(t.GetCreatedAt().AsTime()), when(t.GetUpdatedAt().AsTime()))))
	if r := t.GetActiveRunId(); r != "" {
		sc.line(sc.yellow(fmt.Sprintf("  its run %s is going on: follow it with %s", r, e.command("attach", r))))
	}
	for _, m := range resp.GetMessages() {
		label := sc.bold(strings.ToLower(strings.TrimPrefix(m.GetRole().String(), "ROLE_")) + ":")
		if m.GetPartial() {
			label += sc.dim(" (cut short)")
		}
		var lines []string
		for _, p := range m.GetParts() {
			lines = append(lines, strings.Split(partText(sc, p), "\n")...)
		}
		if len(lines) == 0 {
			lines = []string{sc.dim("(empty)")}
		}
		sc.line(label + " " + lines[0])
		for _, l := range lines[1:] {
			if strings.TrimSpace(l) == "" {
				sc.line("")
			} else {
				sc.line("  " + l)
			}
		}
	}
}

// partText renders one part of a message: text whole, the rest on one line.
func partText(sc *screen, p *agentdv1.Part) string {
	switch k := p.GetKind().(type) {
	case *agentdv1.Part_Text:
		return strings.TrimRight(k.Text, "\n")
	case *agentdv1.Part_Reasoning:
		return sc.dim("thinking: " + clip(k.Reasoning.GetText(), 200))
	case *agentdv1.Part_ToolCall:
		return sc.cyan("⚙ "+k.ToolCall.GetName()) + " " + clip(k.ToolCall.GetArgumentsJson(), 200)
	case *agentdv1.Part_ToolResult:
		r := k.ToolResult
		out := ""
		switch o := r.GetOutput().(type) {
		case *agentdv1.ToolResultPart_Text:
			out = o.Text
		case *agentdv1.ToolResultPart_Json:
			if b, err := json.Marshal(o.Json.AsInterface()); err == nil {
				out = string(b)
			}
		}
		if r.GetIsError() {
			return sc.red("✗ " + r.GetName() + ": " + clip(out, 200))
		}
		return sc.green("→") + " " + r.GetName() + ": " + clip(out, 200)
	case *agentdv1.Part_Media:
		m := k.Media
		return sc.dim("[" + joinNonEmpty(" ", m.GetMimeType(), m.GetName(), m.GetUri()) + "]")
	}
	return sc.dim("[a part agentctl does not know]")
}

// when writes a time in the local zone, or "-" when unset.
func when(t time.Time) string {
	if t.IsZero() || t.Unix() == 0 {
		return "-"
	}
	return t.Local().Format(timeLayout)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
