package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

func TestThreadsListShowDelete(t *testing.T) {
	t.Parallel()
	// Two runs on one thread, with run --history thread: the first makes it.
	r := ctl{}.run(t, args(plain(t), "run", "--history", "thread", "what is 12*7?")...)
	wantOutput(t, r, exitOK, "12*7 = 84")
	id := regexp.MustCompile(` · thread (thread_\w+)\n`).FindStringSubmatch(r.stdout)[1]
	r = ctl{}.run(t, args(plain(t), "run", "--history", "thread", "--thread", id, "what is 2+3?")...)
	wantOutput(t, r, exitOK, " · thread "+id+"\n", "2+3 = 5")

	r = ctl{}.run(t, args(plain(t), "threads")...)
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "THREAD ") || !regexp.MustCompile(`(?m)^`+id+` +demo +8 +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +-$`).MatchString(r.stdout) {
		t.Errorf("threads: %s\nwant a line for %s: agent demo, 8 messages, no active run", r, id)
	}

	r = ctl{}.run(t, args(plain(t), "threads", "show", id)...)
	wantOutput(t, r, exitOK,
		"● thread "+id+" · agent demo · 8 messages · created ",
		"user: what is 12*7?\n"+
			"assistant: ⚙ calculate {\"expression\":\"12*7\"}\n"+
			"tool: → calculate: {\"expression\":\"12*7\",\"result\":84}\n"+
			"assistant: 12*7 = 84\n"+
			"user: what is 2+3?\n",
	)

	r = ctl{}.run(t, args(plain(t), "threads", "show", "--json", id)...)
	var resp agentdv1.GetThreadResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &resp); err != nil || r.code != exitOK {
		t.Fatalf("threads show --json: %v\n%s", err, r)
	}
	if resp.GetThread().GetThreadId() != id || len(resp.GetMessages()) != 8 {
		t.Errorf("threads show --json: thread %q with %d messages, want %s with 8", resp.GetThread().GetThreadId(), len(resp.GetMessages()), id)
	}

	r = ctl{}.run(t, args(plain(t), "threads", "delete", id)...)
	wantOutput(t, r, exitOK, "deleted thread "+id+"\n")
	r = ctl{}.run(t, args(plain(t), "threads", "show", id)...)
	if r.code != exitFailed || !strings.Contains(r.stderr, "agentctl: threads show: NotFound (THREAD_NOT_FOUND): ") {
		t.Errorf("threads show of a deleted thread: %s", r)
	}
	r = ctl{}.run(t, args(plain(t), "threads", "list", "--json")...)
	var list agentdv1.ListThreadsResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &list); err != nil || r.code != exitOK {
		t.Fatalf("threads list --json: %v\n%s", err, r)
	}
	for _, th := range list.GetThreads() {
		if th.GetThreadId() == id {
			t.Errorf("the deleted thread %s is still listed", id)
		}
	}
}

func TestShowThreadMessages(t *testing.T) {
	text := func(s string) *agentdv1.Part { return &agentdv1.Part{Kind: &agentdv1.Part_Text{Text: s}} }
	resp := &agentdv1.GetThreadResponse{
		Thread: &agentdv1.Thread{ThreadId: "thread_1", Agent: "ops", MessageCount: 4, ActiveRunId: "run_7"},
		Messages: []*agentdv1.Message{
			{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{text("clean up\nthe disk")}},
			{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{
				{Kind: &agentdv1.Part_Reasoning{Reasoning: &agentdv1.ReasoningPart{Text: "look first"}}},
				text("Looking."),
				{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCallPart{Id: "c1", Name: "rm", ArgumentsJson: `{"path":"/tmp"}`}}},
			}},
			{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{
				{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResultPart{ToolCallId: "c1", Name: "rm", IsError: true, Output: &agentdv1.ToolResultPart_Text{Text: "denied: not now\nmore"}}}},
				{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResultPart{ToolCallId: "c2", Name: "df", Output: &agentdv1.ToolResultPart_Json{Json: structpb.NewNumberValue(42)}}}},
			}},
			{Role: agentdv1.Role_ROLE_ASSISTANT, Partial: true, Parts: []*agentdv1.Part{text("I could not")}},
		},
	}
	var out bytes.Buffer
	showThread(env{connArgs: []string{"--addr", "agentd.internal:443", "-H", "authorization: Bearer ${TOKEN}", "--expand-headers"}}, newScreen(&out, false, nil), resp)
	want := "● thread thread_1 · agent ops · 4 messages · created - · updated -\n" +
		"  its run run_7 is going on: follow it with agentctl --addr agentd.internal:443 -H 'authorization: Bearer ${TOKEN}' --expand-headers attach run_7\n" +
		"user: clean up\n" +
		"  the disk\n" +
		"assistant: thinking: look first\n" +
		"  Looking.\n" +
		"  ⚙ rm {\"path\":\"/tmp\"}\n" +
		"tool: ✗ rm: denied: not now …\n" +
		"  → df: 42\n" +
		"assistant: (cut short) I could not\n"
	if got := out.String(); got != want {
		t.Errorf("showThread:\n%s\nwant\n%s", got, want)
	}
}
