package runtime_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// weatherSchema is a typed agent's answer: a city and a temperature.
const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"celsius":{"type":"number"}},"required":["city","celsius"],"additionalProperties":false}`

func typedAgent(t *testing.T, m *rt.Model, cfg runtime.Config) *runtime.Agent {
	t.Helper()
	cfg.OutputSchema = json.RawMessage(weatherSchema)
	cfg.Tools = append(cfg.Tools, rt.Tool("lookup", rt.Echo))
	return newAgent(t, m, cfg)
}

// toolResults returns the results of the run's tool messages, in order.
func toolResults(fin *runtime.RunFinished) []runtime.Output {
	var out []runtime.Output
	for _, m := range fin.NewMessages {
		for _, p := range m.Parts {
			if p.Kind == runtime.PartToolResult {
				out = append(out, p.ToolResult.Output)
			}
		}
	}
	return out
}

func TestOutput_ValidFirstTime(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{
		rt.Call(0, "lookup", `{"q":"Oslo"}`),
		rt.Call(1, "final_answer", `{ "city": "Oslo", "celsius": -3 }`),
	}}
	a := typedAgent(t, m, runtime.Config{})
	_, fin := run(t, a, t.Context(), &runtime.Request{})
	if fin.Reason != runtime.EndCompleted || string(fin.Output) != `{"city":"Oslo","celsius":-3}` || fin.FinalText != string(fin.Output) {
		t.Fatalf("finished %v %v, output %s, final text %q; want completed with the compacted answer", fin.Reason, fin.Err, fin.Output, fin.FinalText)
	}
	// The model was offered the output tool, with the schema as its parameters, beside
	// its other tools.
	var offered []string
	for _, s := range m.Requests()[0].Tools {
		offered = append(offered, s.Name)
		if s.Name == "final_answer" && string(s.Parameters) != weatherSchema {
			t.Errorf("final_answer's parameters %s, want the output schema", s.Parameters)
		}
	}
	if strings.Join(offered, ",") != "lookup,final_answer" {
		t.Errorf("offered %v, want lookup and final_answer", offered)
	}
}

func TestOutput_InvalidTwiceThenValid(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{
		rt.Call(0, "final_answer", `{"city":"Oslo"}`),
		rt.Call(1, "final_answer", `{"city":"Oslo","celsius":"cold"}`),
		rt.Call(2, "final_answer", `{"city":"Oslo","celsius":-3}`),
	}}
	a := typedAgent(t, m, runtime.Config{})
	_, fin := run(t, a, t.Context(), &runtime.Request{})
	if fin.Reason != runtime.EndCompleted || string(fin.Output) != `{"city":"Oslo","celsius":-3}` {
		t.Fatalf("finished %v %v, output %s; want completed with the third answer", fin.Reason, fin.Err, fin.Output)
	}
	res := toolResults(fin)
	if len(res) != 3 || !res[0].IsError || !res[1].IsError || res[2].IsError {
		t.Fatalf("results %+v, want two errors and an acceptance", res)
	}
	// Each correction names what is wrong, so that the model can mend it.
	if !strings.Contains(res[0].Text, "celsius") || !strings.Contains(res[1].Text, "celsius") {
		t.Errorf("corrections %q and %q do not name the failing property", res[0].Text, res[1].Text)
	}
}

func TestOutput_InvalidPastTheBudget(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{
		rt.Call(0, "final_answer", `{"city":"Oslo"}`),
		rt.Call(1, "final_answer", `{"city":"Oslo","celsius":"cold"}`),
		rt.Call(2, "final_answer", `{"town":"Oslo"}`),
		rt.Call(3, "final_answer", `{"city":"Oslo","celsius":-3}`), // never asked for
	}}
	a := typedAgent(t, m, runtime.Config{})
	_, fin := run(t, a, t.Context(), &runtime.Request{})
	var oe *runtime.OutputInvalidError
	if fin.Reason != runtime.EndFailed || !errors.As(fin.Err, &oe) || !errors.Is(fin.Err, runtime.ErrOutputInvalid) {
		t.Fatalf("finished %v %v, want failed with an OutputInvalidError", fin.Reason, fin.Err)
	}
	if oe.Attempts != 3 || len(oe.Errors) != 3 || oe.Last != `{"town":"Oslo"}` {
		t.Errorf("error %+v, want 3 attempts, their errors, and the last answer", oe)
	}
	if fin.Output != nil {
		t.Errorf("output %s on a failed run", fin.Output)
	}
	if m.Calls() != 3 {
		t.Errorf("%d model calls, want 3: the default budget corrects twice", m.Calls())
	}
	// The transcript keeps every attempt and what the model was told of each.
	if res := toolResults(fin); len(res) != 3 || !res[2].IsError {
		t.Errorf("results %+v, want the three refusals kept", res)
	}
}

func TestOutput_TextInsteadOfACall(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{
		rt.Say("It is -3 in Oslo."),
		rt.Call(1, "final_answer", `{"city":"Oslo","celsius":-3}`),
	}}
	a := typedAgent(t, m, runtime.Config{})
	_, fin := run(t, a, t.Context(), &runtime.Request{})
	if fin.Reason != runtime.EndCompleted || string(fin.Output) != `{"city":"Oslo","celsius":-3}` {
		t.Fatalf("finished %v %v, output %s; want completed after the correction", fin.Reason, fin.Err, fin.Output)
	}
	second := m.Requests()[1].Messages
	last := second[len(second)-1]
	if last.Role != runtime.RoleUser || !strings.Contains(last.Text(), "final_answer") {
		t.Errorf("the model was told %q (%v), want to be told to call final_answer", last.Text(), last.Role)
	}
}

func TestOutput_TextPastTheBudget(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Say("-3"), rt.Say("minus three"), rt.Say("cold")}}
	a := typedAgent(t, m, runtime.Config{OutputCorrections: -1})
	_, fin := run(t, a, t.Context(), &runtime.Request{})
	var oe *runtime.OutputInvalidError
	if fin.Reason != runtime.EndFailed || !errors.As(fin.Err, &oe) || oe.Attempts != 1 || oe.Last != "-3" {
		t.Fatalf("finished %v %v, want failed at the first text answer, no correction allowed", fin.Reason, fin.Err)
	}
	if m.Calls() != 1 {
		t.Errorf("%d model calls, want 1", m.Calls())
	}
}

func TestOutput_HooksAndPolicyDoNotReachTheAnswer(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "final_answer", `{"city":"Oslo","celsius":-3}`)}}
	deny := denyAll{}
	a := typedAgent(t, m, runtime.Config{Hooks: deny, Policy: runtime.Policy{Default: runtime.ToolPolicy{Approval: runtime.ApprovalAlways}}})
	_, fin := run(t, a, t.Context(), &runtime.Request{})
	if fin.Reason != runtime.EndCompleted || string(fin.Output) != `{"city":"Oslo","celsius":-3}` {
		t.Fatalf("finished %v %v, want the answer taken without an approval or a hook's denial", fin.Reason, fin.Err)
	}
}

// denyAll denies every tool call.
type denyAll struct{ runtime.NoHooks }

func (denyAll) BeforeTool(_ context.Context, in *runtime.ToolCallInput) error {
	in.Deny = "no tools today"
	return nil
}

func TestOutput_SchemaRefused(t *testing.T) {
	for _, tt := range []struct{ name, schema, tool, want string }{
		{name: "not an object", schema: `{"type":"string"}`, want: "root must be an object"},
		{name: "not JSON", schema: `{"type":`, want: "not a JSON object"},
		{name: "too big", schema: `{"type":"object","description":"` + strings.Repeat("x", 70<<10) + `"}`, want: "too complex"},
		{name: "a bomb", schema: string(doublingSchema("anyOf", 20)), want: "subschema applications; the limit is 1000"},
		{name: "a tool with its name", schema: weatherSchema, tool: "final_answer", want: "name of the output tool"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := runtime.Config{Name: "t", Model: &rt.Model{}, OutputSchema: json.RawMessage(tt.schema)}
			if tt.tool != "" {
				cfg.Tools = []runtime.Tool{rt.Tool(tt.tool, rt.Echo)}
			}
			_, err := runtime.New(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want an error saying %q", err, tt.want)
			}
		})
	}
	// A schema within the bounds compiles: the bound is on cost, not on the use of $ref.
	if _, err := runtime.New(runtime.Config{Name: "t", Model: &rt.Model{}, OutputSchema: doublingSchema("anyOf", 3)}); err != nil {
		t.Errorf("a 3-level doubling schema: %v", err)
	}
}

// A run that parks keeps the answers it refused: the resumed run counts them against its
// corrections, as the parked one would have.
func TestOutput_CorrectionsSurviveAPark(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{
		// Step 0: a wrong answer, and a call that needs an approval: the run parks.
		rt.Call(0, "final_answer", `{"city":"Oslo"}`, "lookup", `{"q":"Oslo"}`),
		// Step 1, resumed: a second wrong answer is one more than the one correction.
		rt.Call(1, "final_answer", `{"town":"Oslo"}`),
		rt.Call(2, "final_answer", `{"city":"Oslo","celsius":-3}`), // never asked for
	}}
	cfg := runtime.Config{OutputCorrections: 1, Policy: runtime.Policy{Tools: map[string]runtime.ToolPolicy{"lookup": {Approval: runtime.ApprovalAlways}}}}
	history := []runtime.Message{runtime.UserMessage("weather in Oslo?")}
	_, fin := run(t, typedAgent(t, m, cfg), t.Context(), &runtime.Request{Messages: history})
	if fin.Reason != runtime.EndAwaitingInput || len(fin.Pending.OutputErrors) != 1 {
		t.Fatalf("finished %v, pending %+v; want parked, with the refused answer's error", fin.Reason, fin.Pending)
	}
	ap := &approvals{by: map[string]runtime.Decision{"call_0_1": {Outcome: runtime.OutcomeApproved}}}
	_, fin2 := run(t, typedAgent(t, m, cfg), t.Context(), &runtime.Request{Messages: append(history, fin.NewMessages...), Resume: fin.Pending, Approve: ap.approve})
	var oe *runtime.OutputInvalidError
	if fin2.Reason != runtime.EndFailed || !errors.As(fin2.Err, &oe) || len(oe.Errors) != 2 {
		t.Fatalf("resumed run finished %v %v, want failed after the second wrong answer", fin2.Reason, fin2.Err)
	}
}

// On a model that constrains its replies to a schema, a typed run asks for its answer
// that way: no output tool, the schema in the request, and the reply's text validated
// and corrected all the same.
func TestOutput_Native(t *testing.T) {
	m := &rt.Model{Native: true, Steps: []rt.Step{
		rt.Call(0, "lookup", `{"q":"Oslo"}`),
		rt.Say(`{"city":"Oslo"}`),
		rt.Say(`{"city": "Oslo", "celsius": -3}`),
	}}
	_, fin := run(t, typedAgent(t, m, runtime.Config{}), t.Context(), &runtime.Request{})
	if fin.Reason != runtime.EndCompleted || string(fin.Output) != `{"city":"Oslo","celsius":-3}` {
		t.Fatalf("finished %v %v, output %s; want completed with the corrected reply", fin.Reason, fin.Err, fin.Output)
	}
	for i, req := range m.Requests() {
		if req.Output == nil || req.Output.Name != "final_answer" || string(req.Output.Schema) != weatherSchema {
			t.Errorf("request %d: output %+v, want the schema", i, req.Output)
		}
		for _, s := range req.Tools {
			if s.Name == "final_answer" {
				t.Errorf("request %d offers the output tool in native mode", i)
			}
		}
	}
	third := m.Requests()[2].Messages
	if last := third[len(third)-1]; last.Role != runtime.RoleUser || !strings.Contains(last.Text(), "celsius") {
		t.Errorf("the model was told %q, want what was wrong with its reply", last.Text())
	}
}

// OutputTool offers the tool even where the model could answer natively; OutputNative
// refuses a run on a model that cannot.
func TestOutput_Modes(t *testing.T) {
	m := &rt.Model{Native: true, Steps: []rt.Step{rt.Call(0, "final_answer", `{"city":"Oslo","celsius":-3}`)}}
	_, fin := run(t, typedAgent(t, m, runtime.Config{OutputMode: runtime.OutputTool}), t.Context(), &runtime.Request{})
	if fin.Reason != runtime.EndCompleted || m.Requests()[0].Output != nil {
		t.Errorf("OutputTool: finished %v, request output %+v; want completed through the tool", fin.Reason, m.Requests()[0].Output)
	}
	a := typedAgent(t, &rt.Model{}, runtime.Config{OutputMode: runtime.OutputNative})
	for _, err := range a.Run(t.Context(), &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("hi")}}) {
		if !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("OutputNative on a model that cannot: %v, want ErrInvalidRequest", err)
		}
		break
	}
}

// On a model that can be made to call a tool, a typed run whose only tool is the output
// tool forces its call; with other tools offered it does not, so that they can be used
// first.
func TestOutput_ForcedTool(t *testing.T) {
	answer := rt.Call(0, "final_answer", `{"city":"Oslo","celsius":-3}`)
	alone := &rt.Model{Forces: true, Steps: []rt.Step{answer}}
	a := newAgent(t, alone, runtime.Config{OutputSchema: json.RawMessage(weatherSchema)})
	if _, fin := run(t, a, t.Context(), &runtime.Request{}); fin.Reason != runtime.EndCompleted || alone.Requests()[0].ToolChoice != "final_answer" {
		t.Errorf("alone: finished %v, tool choice %q; want completed, the call forced", fin.Reason, alone.Requests()[0].ToolChoice)
	}
	beside := &rt.Model{Forces: true, Steps: []rt.Step{answer}}
	if _, fin := run(t, typedAgent(t, beside, runtime.Config{}), t.Context(), &runtime.Request{}); fin.Reason != runtime.EndCompleted || beside.Requests()[0].ToolChoice != "" {
		t.Errorf("beside another tool: finished %v, tool choice %q; want completed, nothing forced", fin.Reason, beside.Requests()[0].ToolChoice)
	}
}

func TestOutput_RunSchemaOnAnUntypedAgent(t *testing.T) {
	m := &rt.Model{Steps: []rt.Step{
		rt.Call(0, "final_answer", `{"city":"Oslo"}`),
		rt.Call(1, "final_answer", `{"city":"Oslo","celsius":2}`),
	}}
	a := newAgent(t, m, runtime.Config{Tools: []runtime.Tool{rt.Tool("lookup", rt.Echo)}})
	_, fin := run(t, a, t.Context(), &runtime.Request{OutputSchema: json.RawMessage(weatherSchema)})
	if fin.Reason != runtime.EndCompleted || string(fin.Output) != `{"city":"Oslo","celsius":2}` {
		t.Fatalf("finished %v %v, output %s; want the second answer", fin.Reason, fin.Err, fin.Output)
	}
	if got := m.Requests()[0].Tools; len(got) != 2 || got[1].Name != "final_answer" || string(got[1].Parameters) != weatherSchema {
		t.Errorf("offered %+v, want lookup and final_answer with the run's schema", got)
	}
}

// A run's schema tightens the agent's: the model is offered both (allOf), and an answer
// must match both.
func TestOutput_RunSchemaTightensTheAgents(t *testing.T) {
	tight := `{"type":"object","properties":{"city":{"enum":["Oslo","Bergen"]},"celsius":{"type":"number"}},"required":["city","celsius"]}`
	m := &rt.Model{Steps: []rt.Step{
		rt.Call(0, "final_answer", `{"city":"Paris","celsius":9}`),         // the agent's yes, the run's no
		rt.Call(1, "final_answer", `{"city":"Oslo","celsius":2,"wind":3}`), // the run's yes, the agent's no
		rt.Call(2, "final_answer", `{"city":"Oslo","celsius":2}`),
	}}
	a := typedAgent(t, m, runtime.Config{})
	_, fin := run(t, a, t.Context(), &runtime.Request{OutputSchema: json.RawMessage(tight)})
	if fin.Reason != runtime.EndCompleted || string(fin.Output) != `{"city":"Oslo","celsius":2}` {
		t.Fatalf("finished %v %v, output %s; want the third answer", fin.Reason, fin.Err, fin.Output)
	}
	res := toolResults(fin)
	if len(res) != 3 || !strings.Contains(res[0].Text, "city") || !strings.Contains(res[1].Text, "wind") {
		t.Errorf("results %+v, want the run's schema refusing the city, then the agent's the extra property", res)
	}
	both := `{"type":"object","allOf":[` + weatherSchema + `,` + tight + `]}`
	for _, s := range m.Requests()[0].Tools {
		if s.Name == "final_answer" && string(s.Parameters) != both {
			t.Errorf("offered parameters %s, want both schemas, %s", s.Parameters, both)
		}
	}

	// A schema that refers within itself is offered alone: nested, its references would
	// point elsewhere. Answers must match both all the same.
	withRef := `{"type":"object","$defs":{"c":{"enum":["Oslo"]}},"properties":{"city":{"$ref":"#/$defs/c"}},"required":["city"]}`
	m = &rt.Model{Steps: []rt.Step{rt.Call(0, "final_answer", `{"city":"Oslo"}`), rt.Call(1, "final_answer", `{"city":"Oslo","celsius":1}`)}}
	a = typedAgent(t, m, runtime.Config{})
	_, fin = run(t, a, t.Context(), &runtime.Request{OutputSchema: json.RawMessage(withRef)})
	if fin.Reason != runtime.EndCompleted || string(fin.Output) != `{"city":"Oslo","celsius":1}` {
		t.Fatalf("finished %v %v, output %s; want the second answer", fin.Reason, fin.Err, fin.Output)
	}
	if got := m.Requests()[0].Tools[1].Parameters; string(got) != withRef {
		t.Errorf("offered parameters %s, want the run's schema alone", got)
	}
}

func TestOutput_RunSchemaRefused(t *testing.T) {
	a := newAgent(t, &rt.Model{}, runtime.Config{Tools: []runtime.Tool{rt.Tool("final_answer", rt.Echo)}})
	for name, schema := range map[string]string{
		"not an object": `{"type":"array"}`,
		"not JSON":      `{`,
		"a bomb":        string(doublingSchema("anyOf", 20)),
		"name clash":    weatherSchema,
	} {
		var err error
		for _, e := range a.Run(t.Context(), &runtime.Request{OutputSchema: json.RawMessage(schema), Messages: []runtime.Message{runtime.UserMessage("hi")}}) {
			err = cmp.Or(err, e)
		}
		if !errors.Is(err, runtime.ErrInvalidRequest) || !strings.Contains(err.Error(), "Request.OutputSchema") {
			t.Errorf("%s: error %v, want ErrInvalidRequest naming Request.OutputSchema", name, err)
		}
	}
}
