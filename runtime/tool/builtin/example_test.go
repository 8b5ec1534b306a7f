package builtin_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/tool/builtin"
)

// The built-in tools, with the policy they are meant to run under.
func ExampleTools() {
	notes := new(builtin.Notes)
	policy := builtin.Policy()
	for _, tool := range builtin.Tools(builtin.WithNotes(notes)) {
		name := tool.Spec().Name
		fmt.Println(name, policy.For(name).Approval == runtime.ApprovalAsk)
	}
	// Output:
	// current_time false
	// calculate false
	// save_note true
}

func ExampleCalculate() {
	tool := builtin.Calculate()
	out, err := tool.Execute(context.Background(), runtime.ToolCall{Arguments: `{"expression":"(3 + 4) / 2"}`})
	fmt.Println(out.String(), err)
	_, err = tool.Execute(context.Background(), runtime.ToolCall{Arguments: `{"expression":"1 / (2 - 2)"}`})
	fmt.Println(err)
	// Output:
	// {"expression":"(3 + 4) / 2","result":3.5} <nil>
	// cannot evaluate "1 / (2 - 2)": at position 3: division by zero
}

func ExampleCurrentTime() {
	clock := func() time.Time { return time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC) }
	tool := builtin.CurrentTime(builtin.WithClock(clock))
	out, err := tool.Execute(context.Background(), runtime.ToolCall{Arguments: `{}`})
	fmt.Println(out.String(), err)
	// Output:
	// {"time":"2026-11-30T04:00:00Z","timezone":"UTC","unix":1796011200} <nil>
}

func ExampleSaveNote() {
	notes := new(builtin.Notes)
	tool := builtin.SaveNote(notes)
	out, err := tool.Execute(context.Background(), runtime.ToolCall{Arguments: `{"title":"Shopping","text":"buy milk"}`})
	fmt.Println(out.String(), err)
	for _, n := range notes.List() {
		fmt.Printf("%s: %s: %s\n", n.ID, n.Title, n.Text)
	}
	// Output:
	// {"saved":true,"id":"note_1","title":"Shopping"} <nil>
	// note_1: Shopping: buy milk
}

func ExampleEvaluate() {
	v, err := builtin.Evaluate("2^10 - sqrt(16)")
	fmt.Println(v, err)
	// Output:
	// 1020 <nil>
}

// http_fetch reaches only the hosts it is made with; everything else is refused before
// any request is sent.
func ExampleHTTPFetch() {
	tool, err := builtin.HTTPFetch([]string{"example.com", "*.example.com"})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = tool.Execute(context.Background(), runtime.ToolCall{Arguments: `{"url":"https://example.org/"}`})
	fmt.Println(err)
	// Output:
	// host not allowed: "example.org" is not on the allow-list (example.com, *.example.com)
}

// An address of the host's own network is refused unless the list names it, however
// the URL writes it; the model reads why.
func ExampleHTTPFetch_loopback() {
	tool, err := builtin.HTTPFetch([]string{"*.example.com"})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = tool.Execute(context.Background(), runtime.ToolCall{Arguments: `{"url":"http://[::ffff:127.0.0.1]:8080/admin"}`})
	fmt.Println(err)
	// Output:
	// host not allowed: ::ffff:127.0.0.1 is a loopback address, which the allow-list does not name
}
