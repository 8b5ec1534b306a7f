package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones the tests name exist on every host

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/runtime/tool/builtin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixed is the clock of the tests: a Monday, 04:00 UTC.
var fixed = time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)

func clock() time.Time { return fixed }

func execute(t *testing.T, tool runtime.Tool, args string) (runtime.Output, error) {
	t.Helper()
	return tool.Execute(t.Context(), runtime.ToolCall{ID: "call_1", Name: tool.Spec().Name, Arguments: args})
}

func TestTools(t *testing.T) {
	tools := builtin.Tools(builtin.WithClock(clock))
	var names []string
	for _, tool := range tools {
		spec := tool.Spec()
		names = append(names, spec.Name)
		if spec.Description == "" {
			t.Errorf("%s: no description", spec.Name)
		}
		var schema map[string]any
		if err := json.Unmarshal(spec.Parameters, &schema); err != nil {
			t.Fatalf("%s: schema is not JSON: %v", spec.Name, err)
		}
		if schema["$schema"] != "https://json-schema.org/draft/2020-12/schema" || schema["additionalProperties"] != false || schema["type"] != "object" {
			t.Errorf("%s: schema %s: want a draft 2020-12 object schema without additional properties", spec.Name, spec.Parameters)
		}
		if _, err := runtime.CompileSchema(spec.Parameters); err != nil {
			t.Errorf("%s: CompileSchema: %v", spec.Name, err)
		}
	}
	want := []string{builtin.CurrentTimeName, builtin.CalculateName, builtin.SaveNoteName}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tool names (-want +got):\n%s", diff)
	}
	// The tools must be accepted by an agent as they are.
	if _, err := runtime.New(runtime.Config{Model: &runtimetest.Model{}, Tools: tools, Policy: builtin.Policy()}); err != nil {
		t.Errorf("runtime.New: %v", err)
	}
}

func TestPolicy(t *testing.T) {
	p := builtin.Policy()
	for name, want := range map[string]runtime.Approval{
		builtin.CurrentTimeName: runtime.ApprovalAuto,
		builtin.CalculateName:   runtime.ApprovalAuto,
		builtin.SaveNoteName:    runtime.ApprovalAsk,
		builtin.HTTPFetchName:   runtime.ApprovalAsk,
		"some_other_tool":       runtime.ApprovalAuto,
	} {
		if got := p.For(name); got != (runtime.ToolPolicy{Approval: want}) {
			t.Errorf("Policy().For(%q) = %+v, want approval %v", name, got, want)
		}
	}
}

// TestSchemas checks the arguments each schema accepts and refuses.
func TestSchemas(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		tool string
		args string
		ok   bool
	}{
		{builtin.CurrentTimeName, `{}`, true},
		{builtin.CurrentTimeName, `{"timezone":"Europe/Berlin"}`, true},
		{builtin.CurrentTimeName, `{"timezone":""}`, false},
		{builtin.CurrentTimeName, `{"timezone":7}`, false},
		{builtin.CurrentTimeName, `{"timezone":"` + long(65) + `"}`, false},
		{builtin.CurrentTimeName, `{"zone":"UTC"}`, false},
		{builtin.CurrentTimeName, `[]`, false},

		{builtin.CalculateName, `{"expression":"1+1"}`, true},
		{builtin.CalculateName, `{"expression":"` + long(256) + `"}`, true},
		{builtin.CalculateName, `{}`, false},
		{builtin.CalculateName, `{"expression":""}`, false},
		{builtin.CalculateName, `{"expression":12}`, false},
		{builtin.CalculateName, `{"expression":"` + long(257) + `"}`, false},
		{builtin.CalculateName, `{"expression":"1","x":1}`, false},

		{builtin.SaveNoteName, `{"title":"Milk","text":"buy milk"}`, true},
		{builtin.SaveNoteName, `{"title":"` + long(200) + `","text":"` + long(10000) + `"}`, true},
		{builtin.SaveNoteName, `{"title":"日本語","text":"ü"}`, true},
		{builtin.SaveNoteName, `{"title":"Milk"}`, false},
		{builtin.SaveNoteName, `{"text":"buy milk"}`, false},
		{builtin.SaveNoteName, `{"title":"","text":"buy milk"}`, false},
		{builtin.SaveNoteName, `{"title":"   ","text":"buy milk"}`, false},
		{builtin.SaveNoteName, `{"title":"Milk","text":" \n "}`, false},
		{builtin.SaveNoteName, `{"title":"` + long(201) + `","text":"x"}`, false},
		{builtin.SaveNoteName, `{"title":"x","text":"` + long(10001) + `"}`, false},
		{builtin.SaveNoteName, `{"title":"x","text":"y","tags":[]}`, false},
		{builtin.SaveNoteName, `not json`, false},
	}
	specs := map[string]runtime.ToolSpec{}
	for _, tool := range builtin.Tools() {
		specs[tool.Spec().Name] = tool.Spec()
	}
	for _, tt := range tests {
		schema, err := runtime.CompileSchema(specs[tt.tool].Parameters)
		if err != nil {
			t.Fatalf("%s: %v", tt.tool, err)
		}
		err = schema.Validate(tt.args)
		if (err == nil) != tt.ok {
			args := tt.args
			if len(args) > 80 {
				args = args[:80] + "…"
			}
			t.Errorf("%s: Validate(%s) = %v, want ok %v", tt.tool, args, err, tt.ok)
		}
		if err != nil && !errors.Is(err, runtime.ErrInvalidArguments) {
			t.Errorf("%s: Validate error %v does not wrap ErrInvalidArguments", tt.tool, err)
		}
	}
}

func TestCurrentTime(t *testing.T) {
	tests := []struct {
		args    string
		want    builtin.TimeResult
		wantErr string
	}{
		{args: `{}`, want: builtin.TimeResult{Time: "2026-11-30T04:00:00Z", Timezone: "UTC", Unix: fixed.Unix()}},
		{args: ``, want: builtin.TimeResult{Time: "2026-11-30T04:00:00Z", Timezone: "UTC", Unix: fixed.Unix()}},
		{args: `{"timezone":"utc"}`, want: builtin.TimeResult{Time: "2026-11-30T04:00:00Z", Timezone: "UTC", Unix: fixed.Unix()}},
		{args: `{"timezone":"Asia/Tokyo"}`, want: builtin.TimeResult{Time: "2026-11-30T13:00:00+09:00", Timezone: "Asia/Tokyo", Unix: fixed.Unix()}},
		{args: `{"timezone":"America/New_York"}`, want: builtin.TimeResult{Time: "2026-11-29T23:00:00-05:00", Timezone: "America/New_York", Unix: fixed.Unix()}},
		{args: `{"timezone":"Mars/Olympus_Mons"}`, wantErr: `unknown time zone "Mars/Olympus_Mons"`},
		{args: `{"timezone":"Local"}`, wantErr: `unknown time zone "Local"`},
		{args: `{"timezone":"../../etc/passwd"}`, wantErr: `unknown time zone`},
		{args: `{"tz":"UTC"}`, wantErr: `invalid arguments`},
		{args: `{"timezone":"UTC"} {}`, wantErr: `invalid arguments`},
	}
	tool := builtin.CurrentTime(builtin.WithClock(clock))
	for _, tt := range tests {
		out, err := execute(t, tool, tt.args)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("current_time %s: error %v, want one containing %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("current_time %s: %v", tt.args, err)
			continue
		}
		var got builtin.TimeResult
		if err := json.Unmarshal(out.JSON, &got); err != nil {
			t.Fatalf("current_time %s: output %q: %v", tt.args, out.JSON, err)
		}
		if got != tt.want {
			t.Errorf("current_time %s = %+v, want %+v", tt.args, got, tt.want)
		}
	}
}

func TestCurrentTimeOutputShape(t *testing.T) {
	out, err := execute(t, builtin.CurrentTime(builtin.WithClock(clock)), `{}`)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2026-11-30T04:00:00Z","timezone":"UTC","unix":1796011200}`
	if string(out.JSON) != want || out.IsError {
		t.Errorf("output = %s (error %v), want %s", out.JSON, out.IsError, want)
	}
}

func TestCalculateTool(t *testing.T) {
	tests := []struct {
		args    string
		want    string
		wantErr string
	}{
		{args: `{"expression":"12*7"}`, want: `{"expression":"12*7","result":84}`},
		{args: `{"expression":" (3+4)/2 "}`, want: `{"expression":"(3+4)/2","result":3.5}`},
		{args: `{"expression":"0.1+0.2"}`, want: `{"expression":"0.1+0.2","result":0.3}`},
		{args: `{"expression":"1/0"}`, wantErr: `cannot evaluate "1/0": at position 2: division by zero`},
		{args: `{"expression":"2 +"}`, wantErr: `unexpected end of the expression`},
		{args: `{"expression":"x"}`, wantErr: `unknown name "x"`},
		{args: `{}`, wantErr: `the expression is empty`},
		{args: `{"expr":"1"}`, wantErr: `invalid arguments`},
	}
	tool := builtin.Calculate()
	for _, tt := range tests {
		out, err := execute(t, tool, tt.args)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("calculate %s: error %v, want one containing %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("calculate %s: %v", tt.args, err)
			continue
		}
		if string(out.JSON) != tt.want {
			t.Errorf("calculate %s = %s, want %s", tt.args, out.JSON, tt.want)
		}
	}
}

func TestSaveNoteTool(t *testing.T) {
	notes := builtin.NewNotes(2)
	tool := builtin.SaveNote(notes, builtin.WithClock(clock))
	tests := []struct {
		args    string
		want    string
		wantErr string
	}{
		{args: `{"title":"Milk","text":"buy milk"}`, want: `{"saved":true,"id":"note_1","title":"Milk"}`},
		{args: `{"title":"  <b>&</b>  ","text":"  x  "}`, want: `{"saved":true,"id":"note_2","title":"<b>&</b>"}`},
		{args: `{"title":"Full","text":"no room"}`, wantErr: "no room for another note: this conversation has 2 notes, as many as it may keep"},
		{args: `{"title":" ","text":"x"}`, wantErr: "the title is empty"},
		{args: `{"title":"x","text":""}`, wantErr: "the text is empty"},
		{args: `{"title":"` + strings.Repeat("é", 201) + `","text":"x"}`, wantErr: "the title has 201 characters, more than 200"},
		{args: `{"title":"x","text":"` + strings.Repeat("a", 10001) + `"}`, wantErr: "the text has 10001 characters, more than 10000"},
		{args: `{"title":"x","text":"y","id":"z"}`, wantErr: "invalid arguments"},
	}
	for _, tt := range tests {
		out, err := execute(t, tool, tt.args)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("save_note %.60s: error %v, want one containing %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("save_note %s: %v", tt.args, err)
			continue
		}
		if string(out.JSON) != tt.want {
			t.Errorf("save_note %s = %s, want %s", tt.args, out.JSON, tt.want)
		}
	}
	want := []builtin.Note{
		{ID: "note_1", Title: "Milk", Text: "buy milk", Saved: fixed},
		{ID: "note_2", Title: "<b>&</b>", Text: "x", Saved: fixed},
	}
	if diff := cmp.Diff(want, notes.List()); diff != "" {
		t.Errorf("List() (-want +got):\n%s", diff)
	}
}

func TestToolsWithNotes(t *testing.T) {
	notes := new(builtin.Notes)
	tools := builtin.Tools(builtin.WithNotes(notes), builtin.WithClock(clock))
	if _, err := execute(t, tools[2], `{"title":"a","text":"b"}`); err != nil {
		t.Fatal(err)
	}
	if got := notes.List(); len(got) != 1 || got[0].Title != "a" {
		t.Errorf("List() = %+v, want the note saved through Tools", got)
	}
}

// TestInAgent runs each tool through a real agent, so that the schema, the policy and
// the error handling are the runtime's.
func TestInAgent(t *testing.T) {
	notes := new(builtin.Notes)
	model := &runtimetest.Model{Steps: []runtimetest.Step{
		runtimetest.Call(0,
			builtin.CurrentTimeName, `{"timezone":"Europe/Berlin"}`,
			builtin.CalculateName, `{"expression":"2^10"}`,
			builtin.CalculateName, `{"expression":"1/0"}`,
			builtin.SaveNoteName, `{"title":"t","text":"x"}`,
			builtin.CurrentTimeName, `{"timezone":"Nowhere"}`,
			builtin.SaveNoteName, `{"title":"t"}`,
		),
		runtimetest.Say("done"),
	}}
	agent, err := runtime.New(runtime.Config{
		Model:  model,
		Tools:  builtin.Tools(builtin.WithClock(clock), builtin.WithNotes(notes)),
		Policy: builtin.Policy(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var approvals []string
	req := &runtime.Request{
		Messages: []runtime.Message{runtime.UserMessage("go")},
		Approve: func(_ context.Context, ar runtime.ApprovalRequest) (runtime.Decision, error) {
			approvals = append(approvals, ar.Call.ID)
			return runtime.Decision{Outcome: runtime.OutcomeApproved}, nil
		},
	}
	results := map[string]runtime.Output{}
	var fin *runtime.RunFinished
	for ev, err := range agent.Run(t.Context(), req) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev := ev.(type) {
		case *runtime.ToolCallResult:
			results[ev.Result.CallID] = ev.Result.Output
		case *runtime.RunFinished:
			fin = ev
		}
	}
	if fin == nil || fin.Reason != runtime.EndCompleted {
		t.Fatalf("run finished with %+v, want completed", fin)
	}
	if !slices.Equal(approvals, []string{"call_0_3"}) {
		t.Errorf("approvals asked for %q, want only c4 (save_note)", approvals)
	}
	wants := map[string]struct {
		isError bool
		text    string
	}{
		"call_0_0": {false, `{"time":"2026-11-30T05:00:00+01:00","timezone":"Europe/Berlin","unix":1796011200}`},
		"call_0_1": {false, `{"expression":"2^10","result":1024}`},
		"call_0_2": {true, `tool calculate failed: cannot evaluate "1/0": at position 2: division by zero`},
		"call_0_3": {false, `{"saved":true,"id":"note_1","title":"t"}`},
		"call_0_4": {true, `tool current_time failed: unknown time zone "Nowhere"`},
		"call_0_5": {true, `tool save_note got invalid arguments`},
	}
	for id, want := range wants {
		got, ok := results[id]
		if !ok {
			t.Errorf("%s: no result", id)
			continue
		}
		if got.IsError != want.isError || !strings.HasPrefix(got.String(), want.text) {
			t.Errorf("%s: result %q (error %v), want one starting %q (error %v)", id, got.String(), got.IsError, want.text, want.isError)
		}
	}
	if n := len(notes.List()); n != 1 {
		t.Errorf("%d notes saved, want 1", n)
	}
}
