package agents_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/logtest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/servicetest"
)

func TestModels_ProviderSettingsAndFallbackModels(t *testing.T) {
	var calls atomic.Int32
	var gotKey atomic.Value
	// An OpenAI-compatible server that refuses every request: the agent falls back.
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		gotKey.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":{"message":"model not loaded","type":"invalid_request_error"}}`))
	}))
	defer fake.Close()
	t.Setenv("AGENTD_TEST_KEY", "sk-test-key")
	path := filepath.Join(t.TempDir(), "agents.yaml")
	os.WriteFile(path, []byte(`
agents:
  - name: local
    model: openai:llama3.2
    base_url: `+fake.URL+`/v1
    api_key_env: AGENTD_TEST_KEY
    settings: {temperature: 0.2, max_tokens: 256}
    fallback_models: [demo]
`), 0o644)
	cfg, err := agents.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := agents.NewRegistry(cfg, agents.RegistryOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c := servicetest.NewClient(t, service.Config{Agents: reg, Logger: slog.New(slog.DiscardHandler)})
	resp, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: servicetest.Input("local", "what is 6*7?")})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetResult().GetFinalText(); got != "6*7 = 42" {
		t.Errorf("final text %q, want the fallback demo model's answer", got)
	}
	if calls.Load() == 0 || gotKey.Load() != "Bearer sk-test-key" {
		t.Errorf("the configured server got %d calls with key %v", calls.Load(), gotKey.Load())
	}
}

func TestModels_MissingKeyVariableIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.yaml")
	os.WriteFile(path, []byte(`
agents:
  - name: cloud
    model: anthropic:claude-sonnet-4-5
    api_key_env: AGENTD_TEST_UNSET_KEY
`), 0o644)
	cfg, err := agents.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = agents.NewRegistry(cfg, agents.RegistryOptions{Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "AGENTD_TEST_UNSET_KEY is not set") {
		t.Errorf("error %v, want one naming the unset variable", err)
	}
}

// TestModels_FallbackIsVisible: when the agent's model fails and its fallback
// answers, the registry's logger gets a warning naming both models and the failure,
// and the chat span an event.
func TestModels_FallbackIsVisible(t *testing.T) {
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":{"message":"model not loaded","type":"invalid_request_error"}}`))
	}))
	defer fake.Close()
	path := filepath.Join(t.TempDir(), "agents.yaml")
	os.WriteFile(path, []byte(`
agents:
  - name: local
    model: openai:llama3.2
    base_url: `+fake.URL+`/v1
    fallback_models: [demo]
`), 0o644)
	cfg, err := agents.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENAI_API_KEY", "sk-test")
	logs := &logtest.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	reg, err := agents.NewRegistry(cfg, agents.RegistryOptions{Logger: logger, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	c := servicetest.NewClient(t, service.Config{Agents: reg, Logger: logger})
	resp, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: servicetest.Input("local", "what is 6*7?")})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetResult().GetFinalText(); got != "6*7 = 42" {
		t.Errorf("final text %q, want the fallback demo model's answer", got)
	}

	var warned bool
	for line := range strings.Lines(logs.String()) {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) != nil || r["msg"] != "model failed before answering; falling back to the next model" {
			continue
		}
		warned = true
		errText, _ := r["error"].(string)
		if r["level"] != "WARN" || r["from_model"] != "openai:llama3.2" || r["to_model"] != "demo:agentd-demo" || !strings.Contains(errText, "model not loaded") {
			t.Errorf("fallback record %v, want a warning from openai:llama3.2 to demo:agentd-demo naming the failure", r)
		}
	}
	if !warned {
		t.Errorf("no fallback warning in the registry's log:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "6*7?") {
		t.Errorf("the log holds the prompt:\n%s", logs.String())
	}

	// The demo model calls a tool, then answers: two model calls, each falling back.
	chats, events := 0, 0
	for _, s := range exp.GetSpans() {
		if strings.HasPrefix(s.Name, "chat ") {
			chats++
		}
		for _, ev := range s.Events {
			if ev.Name != "gen_ai.model.fallback" {
				continue
			}
			events++
			if s.Name != "chat llama3.2" {
				t.Errorf("gen_ai.model.fallback on span %q, want it on the model call's", s.Name)
			}
		}
	}
	if chats != 2 || events != chats {
		t.Errorf("%d gen_ai.model.fallback events on %d chat spans, want one on each of 2", events, chats)
	}
	if n := strings.Count(logs.String(), `"to_model":"demo:agentd-demo"`); n != chats {
		t.Errorf("%d fallback warnings, want one per model call (%d)", n, chats)
	}
}

func TestModels_IdleTimeout(t *testing.T) {
	for _, tc := range []struct{ setting, wantErr string }{
		{"idle_timeout: 90s", ""},
		{"idle_timeout: -1s", "settings.idle_timeout: must not be negative, got -1s"},
		{"idle_timeout: soon", `invalid duration "soon"`},
	} {
		t.Run(tc.setting, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agents.yaml")
			os.WriteFile(path, []byte(`
agents:
  - name: local
    model: openai:llama3.2
    base_url: http://localhost:11434/v1
    settings: {`+tc.setting+`}
`), 0o644)
			cfg, err := agents.LoadFile(path)
			if err == nil {
				var reg *agents.Registry
				reg, err = agents.NewRegistry(cfg, agents.RegistryOptions{Logger: slog.New(slog.DiscardHandler)})
				if err == nil {
					reg.Close()
				}
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// An anthropic agent's calls carry prompt-cache breakpoints unless its settings say
// prompt_cache: false; through the service, end to end.
func TestModels_PromptCacheSetting(t *testing.T) {
	var mu sync.Mutex
	bodies := map[string]string{} // by system prompt
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			System []struct{ Text string } `json:"system"`
		}
		json.Unmarshal(body, &req)
		mu.Lock()
		if len(req.System) > 0 {
			bodies[req.System[0].Text] = string(body)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","usage":{"input_tokens":5,"cache_read_input_tokens":1200,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}

event: message_stop
data: {"type":"message_stop"}

`)
	}))
	defer fake.Close()
	path := writeAgentsFile(t, `
agents:
  - name: cached
    model: anthropic:claude-sonnet-4-5
    base_url: `+fake.URL+`
    system: cached agent
  - name: uncached
    model: anthropic:claude-sonnet-4-5
    base_url: `+fake.URL+`
    system: uncached agent
    settings: {prompt_cache: false}
`, nil)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test")
	c := serveAgents(t, loadRegistry(t, path, nil))
	for _, agent := range []string{"cached", "uncached"} {
		resp, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: servicetest.Input(agent, "hello")})
		if err != nil {
			t.Fatal(err)
		}
		if u := resp.GetResult().GetUsage(); u.GetCacheReadInputTokens() != 1200 || u.GetInputTokens() != 1205 {
			t.Errorf("%s: usage %v, want 1200 tokens read from the cache, 1205 input in all", agent, u)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(bodies["cached agent"], `"cache_control":{"type":"ephemeral"}`) {
		t.Errorf("the cached agent's request has no cache breakpoint: %s", bodies["cached agent"])
	}
	if b := bodies["uncached agent"]; b == "" || strings.Contains(b, "cache_control") {
		t.Errorf("the agent with prompt_cache: false sent %q, want a request without cache breakpoints", b)
	}
}
