package demo_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/demo"
	"github.com/agentd/agentd/runtime/tool/builtin"
)

// A typed agent on the demo model answers with a value of its schema, made from what it
// would have said: the run completes with a result the schema accepts.
func TestTypedAnswer(t *testing.T) {
	schema := `{"type":"object","required":["answer","result","exact","unit","steps"],"properties":{
		"answer":{"type":"string","maxLength":9},"result":{"type":"integer"},"exact":{"type":"boolean"},
		"unit":{"enum":["none","cm"]},"steps":{"type":"array","minItems":1,"items":{"type":"string"}}},
		"additionalProperties":false}`
	a, err := runtime.New(runtime.Config{
		Model: demo.New(demo.Config{}), Tools: []runtime.Tool{builtin.Calculate()}, OutputSchema: json.RawMessage(schema),
	})
	if err != nil {
		t.Fatal(err)
	}
	var fin *runtime.RunFinished
	for ev, err := range a.Run(t.Context(), &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("what is 12*7")}}) {
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := ev.(*runtime.RunFinished); ok {
			fin = f
		}
	}
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("finished %v %v, want completed", fin.Reason, fin.Err)
	}
	var got map[string]any
	if err := json.Unmarshal(fin.Output, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"answer": "12*7 = 84", "result": 84.0, "exact": true, "unit": "none", "steps": []any{"12*7 = 84"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if fin.Usage.ModelCalls != 2 {
		t.Errorf("%d model calls, want 2: calculate, then the answer", fin.Usage.ModelCalls)
	}
}
