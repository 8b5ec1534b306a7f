package demo

import (
	"strings"
	"testing"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/tool/builtin"
)

func TestFindExpression(t *testing.T) {
	tests := []struct{ in, want string }{
		{"what is 12*7", "12*7"},
		{"What is 12*7?", "12*7"},
		{"calculate (3+4)/2", "(3+4)/2"},
		{"2+2", "2+2"},
		{"2 + 2 = ?", "2 + 2"},
		{"what's 12 times 7?", "12 * 7"},
		{"1 plus 2 plus 3", "1 + 2 + 3"},
		{"10 divided by 4", "10 / 4"},
		{"2 to the power of 8", "2 ^ 8"},
		{"12x7", "12*7"},
		{"12 x 7", "12 * 7"},
		{"how much is -3 * -4.5, please", "-3 * -4.5"},
		{"(what is 2+2)", "2+2"},
		{"compute sqrt(16) + abs(-2)", "sqrt(16) + abs(-2)"},
		{"is 1e3/4 right", "1e3/4"},
		{"what is 2**10.", "2**10"},
		{"12 × 7", "12 × 7"},
		{"add 2 and 3", "2 + 3"},
		{"what is the sum of 1.5 and 2", "1.5 + 2"},
		{"subtract 3 from 10", "10 - 3"},
		{"multiply 3 by 4", "3 * 4"},
		{"divide 10 by 4", "10 / 4"},
		{"what is 15% of 80?", "15 / 100 * 80"},
		{"square root of 16", "sqrt(16)"},
		{"add milk and eggs", ""},
		{"first 1+1, then 10*10*10", "10*10*10"},
		{"2 +", ""},
		{"hello", ""},
		{"it is -5 degrees", ""},
		{"meet me on 2026-11-30", ""},
		{"on 30/11/2026", ""},
		{"covid-19", ""},
		{"what time is it", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := findExpression(tt.in); got != tt.want {
			t.Errorf("findExpression(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNoteFrom(t *testing.T) {
	tests := []struct{ in, title, text string }{
		{"save a note: buy milk", "Buy milk", "buy milk"},
		{"Save a note: Buy milk.\nAnd eggs.", "Buy milk", "Buy milk.\nAnd eggs."},
		{"please save a note that the meeting moved to Friday", "The meeting moved to Friday", "the meeting moved to Friday"},
		{"remember to call mom", "Call mom", "call mom"},
		{"remind me to call mum", "Call mum", "call mum"},
		{"Don't forget to water the plants", "Water the plants", "water the plants"},
		{"Remember that the code is 1234", "The code is 1234", "the code is 1234"},
		{"can you note down: wifi password is hunter2", "Wifi password is hunter2", "wifi password is hunter2"},
		{"take a note - dentist on Tuesday!", "Dentist on Tuesday", "dentist on Tuesday!"},
		{"I need you to remember my keys are in the drawer", "I need you to remember my keys are in the drawer", "I need you to remember my keys are in the drawer"},
		{"note: " + strings.Repeat("word ", 30), "Word word word word word word word word word word word…", strings.TrimSpace(strings.Repeat("word ", 30))},
		{"save a note", "", ""},
		{"save a note:   ", "", ""},
		{"remember: ?!", "", ""},
	}
	for _, tt := range tests {
		title, text := noteFrom(tt.in)
		if title != tt.title || text != tt.text {
			t.Errorf("noteFrom(%q) = %q, %q; want %q, %q", tt.in, title, text, tt.title, tt.text)
		}
		if n := len([]rune(title)); n > builtin.MaxTitleLen {
			t.Errorf("noteFrom(%q): title has %d characters", tt.in, n)
		}
	}
}

func TestRespond(t *testing.T) {
	all := []runtime.ToolSpec{{Name: builtin.CurrentTimeName}, {Name: builtin.CalculateName}, {Name: builtin.SaveNoteName}}
	tests := []struct {
		name     string
		msgs     []runtime.Message
		tools    []runtime.ToolSpec
		wantCall *runtime.ToolCall
		wantText []string // substrings of the answer
	}{
		{
			name:     "time",
			msgs:     []runtime.Message{runtime.UserMessage("What time is it?")},
			tools:    all,
			wantCall: &runtime.ToolCall{ID: "call_demo_1", Name: "current_time", Arguments: `{"timezone":"UTC"}`},
		},
		{
			name:     "time in a zone",
			msgs:     []runtime.Message{runtime.SystemMessage("be nice"), runtime.UserMessage("what's the date in America/New_York")},
			tools:    all,
			wantCall: &runtime.ToolCall{ID: "call_demo_2", Name: "current_time", Arguments: `{"timezone":"America/New_York"}`},
		},
		{
			name:     "arithmetic",
			msgs:     []runtime.Message{runtime.UserMessage("what is 12*7")},
			tools:    all,
			wantCall: &runtime.ToolCall{ID: "call_demo_1", Name: "calculate", Arguments: `{"expression":"12*7"}`},
		},
		{
			name:     "note",
			msgs:     []runtime.Message{runtime.UserMessage("save a note: buy <milk> & eggs")},
			tools:    all,
			wantCall: &runtime.ToolCall{ID: "call_demo_1", Name: "save_note", Arguments: `{"title":"Buy <milk> & eggs","text":"buy <milk> & eggs"}`},
		},
		{
			name:     "note before arithmetic",
			msgs:     []runtime.Message{runtime.UserMessage("remember: 2+2 is 4")},
			tools:    all,
			wantCall: &runtime.ToolCall{ID: "call_demo_1", Name: "save_note", Arguments: `{"title":"2+2 is 4","text":"2+2 is 4"}`},
		},
		{
			name:     "empty note",
			msgs:     []runtime.Message{runtime.UserMessage("save a note")},
			tools:    all,
			wantText: []string{"What should the note say?"},
		},
		{
			name:     "hello",
			msgs:     []runtime.Message{runtime.UserMessage("hello")},
			tools:    all,
			wantText: []string{"built-in demo model, not a language model", "current_time", "calculate", "save_note", "--model openai:gpt-4.1-mini", "OPENAI_API_KEY", "--model anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY", "Ollama", "OPENAI_BASE_URL"},
		},
		{
			name:     "thanks",
			msgs:     []runtime.Message{runtime.UserMessage("thanks!")},
			tools:    all,
			wantText: []string{"You're welcome!", "save a note"},
		},
		{
			name:     "a reminder is a note",
			msgs:     []runtime.Message{runtime.UserMessage("remind me to call mum")},
			tools:    all,
			wantCall: &runtime.ToolCall{ID: "call_demo_1", Name: "save_note", Arguments: `{"title":"Call mum","text":"call mum"}`},
		},
		{
			name:     "the time of a city",
			msgs:     []runtime.Message{runtime.UserMessage("what time is it in Tokyo?")},
			tools:    all,
			wantCall: &runtime.ToolCall{ID: "call_demo_1", Name: "current_time", Arguments: `{"timezone":"Asia/Tokyo"}`},
		},
		{
			name:     "calculate without an expression",
			msgs:     []runtime.Message{runtime.UserMessage("calculate something")},
			tools:    all,
			wantText: []string{"I found no arithmetic expression", "not a language model"},
		},
		{
			name:     "no tools",
			msgs:     []runtime.Message{runtime.UserMessage("hi")},
			wantText: []string{"No tools are available"},
		},
		{
			name:     "no messages",
			tools:    all,
			wantText: []string{"not a language model"},
		},
		{
			name:     "tool missing",
			msgs:     []runtime.Message{runtime.UserMessage("what time is it")},
			tools:    []runtime.ToolSpec{{Name: builtin.CalculateName}},
			wantText: []string{"The current_time tool is not available in this run"},
		},
		{
			name:     "calculate missing",
			msgs:     []runtime.Message{runtime.UserMessage("2+2")},
			wantText: []string{"The calculate tool is not available in this run, so I cannot work out 2+2."},
		},
		{
			name:     "note tool missing",
			msgs:     []runtime.Message{runtime.UserMessage("save a note: x")},
			wantText: []string{"The save_note tool is not available"},
		},
		{
			name: "results",
			msgs: []runtime.Message{runtime.UserMessage("x"), toolMessage(
				runtime.ToolResult{Name: "current_time", Output: runtime.Output{JSON: []byte(`{"time":"2026-11-30T13:00:00+09:00","timezone":"Asia/Tokyo","unix":1796011200}`)}},
				runtime.ToolResult{Name: "calculate", Output: runtime.Output{JSON: []byte(`{"expression":"1e21*10","result":1e22}`)}},
				runtime.ToolResult{Name: "calculate", Output: runtime.Output{JSON: []byte(`{"expression":"1/4","result":0.25}`)}},
				runtime.ToolResult{Name: "save_note", Output: runtime.Output{JSON: []byte(`{"saved":true,"id":"note_3","title":"Milk"}`)}},
				runtime.ToolResult{Name: "save_note", Output: runtime.ErrorOutput("the call of save_note was denied: no")},
				runtime.ToolResult{Name: "lookup", Output: runtime.Output{Text: "42"}},
				runtime.ToolResult{Name: "calculate", Output: runtime.Output{Text: "not JSON"}},
			)},
			wantText: []string{
				"It is 13:00 on Monday, 30 November 2026 in Asia/Tokyo (2026-11-30T13:00:00+09:00).\n" +
					"1e21*10 = 1e+22\n" +
					"1/4 = 0.25\n" +
					"Saved your note \"Milk\" (note_3).\n" +
					"The save_note tool failed. Its error: “the call of save_note was denied: no”. Nothing was saved.\n" +
					"The lookup tool returned: 42\n" +
					"The calculate tool returned: not JSON",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := respond(&runtime.ModelRequest{Messages: tt.msgs, Tools: tt.tools})
			if tt.wantCall != nil {
				if r.call == nil || *r.call != *tt.wantCall {
					t.Fatalf("respond() = call %+v, text %q; want call %+v", r.call, r.text, tt.wantCall)
				}
				return
			}
			if r.call != nil {
				t.Fatalf("respond() = call %+v, want text", r.call)
			}
			for _, want := range tt.wantText {
				if !strings.Contains(r.text, want) {
					t.Errorf("respond() = %q, want it to contain %q", r.text, want)
				}
			}
		})
	}
}

func toolMessage(results ...runtime.ToolResult) runtime.Message {
	m := runtime.Message{Role: runtime.RoleTool}
	for _, r := range results {
		m.Parts = append(m.Parts, runtime.Part{Kind: runtime.PartToolResult, ToolResult: r})
	}
	return m
}

func TestWordsAndFragments(t *testing.T) {
	text := "Hello! I am  agentd's\nbuilt-in demo model, not a language model."
	chunks := words(text, 3)
	if got := strings.Join(chunks, ""); got != text {
		t.Errorf("words joined = %q, want %q", got, text)
	}
	want := []string{"Hello! I am  ", "agentd's\nbuilt-in demo ", "model, not a ", "language model."}
	if strings.Join(chunks, "|") != strings.Join(want, "|") {
		t.Errorf("words = %q, want %q", chunks, want)
	}
	args := `{"title":"Grüße 日本語 🎉"}`
	frags := fragments(args, 4)
	if got := strings.Join(frags, ""); got != args {
		t.Errorf("fragments joined = %q", got)
	}
	for _, f := range frags {
		if !utf8ValidNonEmpty(f) {
			t.Errorf("fragment %q is not valid, non-empty UTF-8", f)
		}
	}
	if got := fragments("", 4); len(got) != 1 || got[0] != "" {
		t.Errorf("fragments(\"\") = %q, want one empty fragment", got)
	}
}

func utf8ValidNonEmpty(s string) bool {
	return s != "" && strings.ToValidUTF8(s, "\uFFFD") == s
}

func TestFindZone(t *testing.T) {
	tests := []struct{ in, want string }{
		{"what time is it", "UTC"},
		{"time in Europe/Berlin?", "Europe/Berlin"},
		{"time in America/Argentina/Salta.", "America/Argentina/Salta"},
		{"Etc/GMT+2 time", "Etc/GMT+2"},
		{"time in UTC", "UTC"},
		{"time on Mars/Olympus", "Mars/Olympus"},
		{"time in europe/berlin", "Europe/Berlin"}, // not a zone name, but a city
		{"time in Tokyo", "Asia/Tokyo"},
		{"what time is it in New York?", "America/New_York"},
		{"what's the time in rio de janeiro", "America/Sao_Paulo"},
		{"and in São Paulo?", "America/Sao_Paulo"},
		{"time in Newark", "UTC"},
	}
	for _, tt := range tests {
		if got := findZone(tt.in); got != tt.want {
			t.Errorf("findZone(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDelegation(t *testing.T) {
	for in, want := range map[string]string{
		"ask the researcher what time it is in Tokyo?": "what time it is in Tokyo",
		"Please ask researcher about 12*7":             "12*7",
		"ask the researcher: what is 2+2":              "what is 2+2",
		"ask the researcher to save a note: milk":      "save a note: milk",
		"what is 12*7":                  "",
		"ask the weatherman about rain": "",
	} {
		if got := delegation(in); got != want {
			t.Errorf("delegation(%q) = %q, want %q", in, got, want)
		}
	}
}
