package runtime_test

import (
	"bytes"
	"fmt"
	"testing"
	"unicode/utf8"

	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// FuzzAssembleToolCalls checks that any fragmentation and interleaving of tool-call deltas
// assembles to exactly the original arguments, whichever way the provider keys its
// fragments: by id on every fragment (mode 0), by index after an id on the first (mode 1),
// index 0 for every call (mode 2), or no index at all (mode 3); and that no event splits a
// character.
func FuzzAssembleToolCalls(f *testing.F) {
	f.Add(uint8(0), []byte(`{"a":1}|{"b":"xyz"}`), []byte{1, 2, 3, 4, 5, 6})
	f.Add(uint8(1), []byte(`{"city":"Zürich"}|{"q":"日本語"}|{}`), []byte{7, 0, 3, 9, 1, 1, 2})
	f.Add(uint8(2), []byte(`{"n":1}|{"n":2}|{"n":3}`), []byte{2, 2, 2})
	f.Add(uint8(3), []byte(`{"deep":{"x":[1,2,{"y":"z"}]}}|`), []byte{0, 1, 0, 1})
	f.Add(uint8(1), []byte("\xe2\x82\xac|\xf0\x9f\x98\x80"), []byte{1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, mode uint8, argsData, plan []byte) {
		mode %= 4
		args := bytes.Split(argsData, []byte("|"))
		if len(args) > 4 {
			args = args[:4]
		}
		p := 0
		next := func(n int) int { // the plan's next choice in [0, n)
			if n <= 1 || len(plan) == 0 {
				return 0
			}
			c := int(plan[p%len(plan)]) % n
			p++
			return c
		}
		// Split each call's arguments into fragments at the plan's cuts.
		frags := make([][]string, len(args))
		for i, a := range args {
			rest := string(a)
			for len(rest) > 0 {
				n := 1 + next(len(rest))
				frags[i] = append(frags[i], rest[:n])
				rest = rest[n:]
			}
			if len(frags[i]) == 0 {
				frags[i] = []string{""}
			}
		}
		// Emit the fragments, interleaved where the mode allows it.
		var evs []runtime.ModelEvent
		sent := make([]int, len(args))
		emit := func(i int) {
			id, name, index := "", "", -1
			first := sent[i] == 0
			if first {
				id, name = fmt.Sprintf("id%d", i), "t"
			}
			switch mode {
			case 0:
				id = fmt.Sprintf("id%d", i)
			case 1:
				index = i
			case 2:
				index = 0
			}
			evs = append(evs, rt.ToolDelta(index, id, name, frags[i][sent[i]]))
			sent[i]++
		}
		if mode <= 1 {
			for left := len(args); left > 0; {
				var open []int
				for i := range args {
					if sent[i] < len(frags[i]) {
						open = append(open, i)
					}
				}
				i := open[next(len(open))]
				emit(i)
				if sent[i] == len(frags[i]) {
					left--
				}
			}
		} else {
			for i := range args {
				for sent[i] < len(frags[i]) {
					emit(i)
				}
			}
		}
		m := &rt.Model{Steps: []rt.Step{{Events: append(evs, rt.Finish(runtime.FinishToolCalls))}}}
		a, err := runtime.New(runtime.Config{Model: m, Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, MaxSteps: 1, NewID: rt.SequentialIDs()})
		if err != nil {
			t.Fatal(err)
		}
		done := map[string]string{}
		var calls []runtime.ToolCall
		for ev, err := range a.Run(t.Context(), &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("go")}}) {
			if err != nil {
				t.Fatal(err)
			}
			switch e := ev.(type) {
			case *runtime.ToolCallArgsDone:
				done[e.CallID] = e.Arguments
			case *runtime.ToolCallArgsDelta:
				// A character split across fragments is never split across events.
				if !utf8.ValidString(e.Delta) && utf8.Valid(argsData) {
					t.Errorf("call %s: delta %q is not valid UTF-8", e.CallID, e.Delta)
				}
			case *runtime.StepFinished:
				calls = e.NewMessages[0].ToolCalls()
			}
		}
		if len(done) != len(args) || len(calls) != len(args) {
			t.Fatalf("%d args_done and %d calls, want %d", len(done), len(calls), len(args))
		}
		// Calls keep their order of arrival; each has exactly its arguments.
		for _, c := range calls {
			var i int
			if _, err := fmt.Sscanf(c.ID, "id%d", &i); err != nil || i >= len(args) {
				t.Fatalf("unexpected call id %q", c.ID)
			}
			if c.Arguments != string(args[i]) || done[c.ID] != string(args[i]) {
				t.Errorf("call %s: transcript %q, args_done %q, want %q", c.ID, c.Arguments, done[c.ID], args[i])
			}
		}
	})
}
