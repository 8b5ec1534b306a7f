package main

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// listAgents is `agentctl agents`: one paragraph per agent, or the response as JSON.
func listAgents(ctx context.Context, client agentdv1.AgentServiceClient, asJSON bool, e env) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() { // Ctrl-C ends the call
		defer close(stopped)
		select {
		case <-e.interrupts:
			cancel()
		case <-done:
		}
	}()
	defer func() {
		close(done)
		<-stopped
	}()
	resp, err := client.ListAgents(ctx, &agentdv1.ListAgentsRequest{})
	if err != nil {
		if isCanceled(err) && ctx.Err() != nil {
			return exitCancel
		}
		fmt.Fprintf(e.stderr, "agentctl: ListAgents: %s\n", e.describeErr(err))
		return exitFailed
	}
	if asJSON {
		b, err := protojson.Marshal(resp)
		if err != nil {
			fmt.Fprintf(e.stderr, "agentctl: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
		return exitOK
	}
	if len(resp.GetAgents()) == 0 {
		fmt.Fprintln(e.stdout, "no agents")
		return exitOK
	}
	for i, a := range resp.GetAgents() {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		fmt.Fprint(e.stdout, formatAgent(a))
	}
	return exitOK
}

// formatAgent describes an agent in a few lines:
//
//	demo  demo:agentd-demo  max 25 steps  (default: runs when no --agent is given)
//	  agentd's built-in demo agent: …
//	  tools: current_time, calculate, save_note (needs approval)
//
// A tool that "needs approval" may be approved by the server under --auto-approve; one
// that "needs explicit approval" is always asked.
func formatAgent(a *agentdv1.Agent) string {
	var b strings.Builder
	b.WriteString(a.GetName())
	if a.GetModel() != "" {
		b.WriteString("  " + a.GetModel())
	}
	if a.GetModelOverrideAllowed() {
		b.WriteString(" (override allowed)")
	}
	if a.GetMaxSteps() > 0 {
		fmt.Fprintf(&b, "  max %d steps", a.GetMaxSteps())
	}
	if a.GetIsDefault() {
		b.WriteString("  (default: runs when no --agent is given)")
	}
	b.WriteString("\n")
	if d := a.GetDescription(); d != "" {
		b.WriteString("  " + d + "\n")
	}
	if len(a.GetTools()) == 0 {
		b.WriteString("  no tools\n")
		return b.String()
	}
	var tools []string
	for _, t := range a.GetTools() {
		var notes []string
		if !t.GetEnabled() {
			notes = append(notes, "disabled")
		}
		switch {
		case t.GetApproval() == agentdv1.ToolApproval_TOOL_APPROVAL_ALWAYS:
			notes = append(notes, "needs explicit approval") // --auto-approve does not give it
		case t.GetRequiresApproval():
			notes = append(notes, "needs approval")
		}
		if t.GetCompletesRun() {
			notes = append(notes, "ends the run")
		}
		if s := t.GetSource(); s != "" && s != "builtin" {
			notes = append(notes, s)
		}
		name := t.GetSpec().GetName()
		if len(notes) > 0 {
			name += " (" + strings.Join(notes, ", ") + ")"
		}
		tools = append(tools, name)
	}
	b.WriteString("  tools: " + strings.Join(tools, ", ") + "\n")
	return b.String()
}
