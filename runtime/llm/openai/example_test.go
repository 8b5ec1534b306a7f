package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/openai"
	"github.com/agentd/agentd/runtime/tool/builtin"
)

// An agent on a model served by Ollama on this machine: any OpenAI-compatible server
// works through its base URL.
func ExampleNew_ollama() {
	m, err := openai.New(openai.Config{Model: "llama3.2", BaseURL: "http://localhost:11434/v1"})
	if err != nil {
		panic(err)
	}
	agent, err := runtime.New(runtime.Config{Model: m, Tools: builtin.Tools(), Policy: builtin.Policy()})
	if err != nil {
		panic(err)
	}
	_ = agent // agent.Run(ctx, &runtime.Request{…})
}

// Streaming one call, here from a server that replays a recorded stream.
func ExampleModel_Stream() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		data, _ := os.ReadFile("testdata/text.sse")
		w.Write(data)
	}))
	defer srv.Close()
	m, err := openai.New(openai.Config{Model: "gpt-4.1-mini", BaseURL: srv.URL, APIKey: "sk-…"})
	if err != nil {
		panic(err)
	}
	req := &runtime.ModelRequest{Messages: []runtime.Message{runtime.UserMessage("Hello")}}
	for ev, err := range m.Stream(context.Background(), req) {
		if err != nil {
			panic(err)
		}
		switch ev.Kind {
		case runtime.ModelTextDelta:
			fmt.Print(ev.Text)
		case runtime.ModelUsage:
			fmt.Printf("\n%d tokens in, %d out\n", ev.Usage.InputTokens, ev.Usage.OutputTokens)
		case runtime.ModelFinish:
			fmt.Println(ev.Reason)
		}
	}
	// Output:
	// Hello! How can I help you today?
	// 19 tokens in, 10 out
	// stop
}
