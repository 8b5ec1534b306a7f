package agents_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/agents"
)

func TestHostedModelProviders(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
	t.Setenv("ANTHROPIC_BASE_URL", "")
	ps := agents.HostedModelProviders()
	var names []string
	for _, p := range ps {
		names = append(names, fmt.Sprintf("%s %v", p.Name, p.Forms))
	}
	if got, want := strings.Join(names, "; "), "openai [openai:<model>]; openai-responses [openai-responses:<model>]; anthropic [anthropic:<model>]"; got != want {
		t.Errorf("providers %q, want %q", got, want)
	}
	resolve := agents.NewModelResolver(append(agents.BuiltinModelProviders(0), ps...)...)
	for spec, want := range map[string]string{
		"openai:gpt-4.1-mini":         "openai:gpt-4.1-mini",
		"openai-responses:o4-mini":    "openai-responses:o4-mini",
		"anthropic:claude-sonnet-4-5": "anthropic:claude-sonnet-4-5",
		"demo":                        "demo:agentd-demo",
	} {
		m, err := resolve(spec)
		if err != nil {
			t.Errorf("resolve(%q): %v", spec, err)
			continue
		}
		if m.Name() != want {
			t.Errorf("resolve(%q).Name() = %q, want %q", spec, m.Name(), want)
		}
	}
	for _, spec := range []string{"openai", "anthropic", "openai:"} {
		if _, err := resolve(spec); !errors.Is(err, agents.ErrUnknownModel) {
			t.Errorf("resolve(%q) = %v, want ErrUnknownModel", spec, err)
		}
	}
	if _, err := resolve("gemini:pro"); err == nil || strings.Contains(err.Error(), "arrive with the provider adapters") {
		t.Errorf("resolve(gemini:pro) = %v, want an error that no longer promises openai and anthropic", err)
	}
}

func TestOpenAIModelProvider_NoKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	resolve := agents.NewModelResolver(agents.HostedModelProviders()...)
	_, err := resolve("openai:gpt-4.1-mini")
	if err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") || errors.Is(err, agents.ErrUnknownModel) {
		t.Errorf("resolve without a key = %v, want an error naming OPENAI_API_KEY", err)
	}
}

// TestOpenAIModelProvider_Environment: the quick path without a file, agentd --model
// openai:<model> with OPENAI_BASE_URL and OPENAI_API_KEY, reaches the server the
// variables name, with the key.
func TestOpenAIModelProvider_Environment(t *testing.T) {
	auth := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth <- r.Header.Get("Authorization")
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"llama3.2","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	t.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", "ollama")
	reg, err := agents.NewRegistry(nil, agents.RegistryOptions{
		ModelOverride: "openai:llama3.2",
		Resolve:       agents.NewModelResolver(append(agents.BuiltinModelProviders(0), agents.HostedModelProviders()...)...),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	m := defaultOf(t, reg).Runtime.Model()
	var text string
	for ev, err := range m.Stream(t.Context(), &runtime.ModelRequest{Messages: []runtime.Message{runtime.UserMessage("hi")}}) {
		if err != nil {
			t.Fatal(err)
		}
		text += ev.Text
	}
	if a := <-auth; text != "Hi" || a != "Bearer ollama" {
		t.Errorf("got %q with Authorization %q, want Hi with Bearer ollama", text, a)
	}
	// The provider's shared client keeps the connection: close it for the leak check.
	srv.CloseClientConnections()
}
