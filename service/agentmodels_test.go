package service_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/servicetest"
)

func TestAgentsFile_ProviderSettingsAndFallbackModels(t *testing.T) {
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
	cfg, err := service.LoadAgentsFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := service.NewRegistry(cfg, service.RegistryOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c := servicetest.NewClient(t, service.Config{Agents: reg, ContinuationKey: testKey, Logger: slog.New(slog.DiscardHandler)})
	resp, err := c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: input("local", "what is 6*7?")})
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

func TestAgentsFile_MissingKeyVariableIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.yaml")
	os.WriteFile(path, []byte(`
agents:
  - name: cloud
    model: anthropic:claude-sonnet-4-5
    api_key_env: AGENTD_TEST_UNSET_KEY
`), 0o644)
	cfg, err := service.LoadAgentsFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = service.NewRegistry(cfg, service.RegistryOptions{Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "AGENTD_TEST_UNSET_KEY is not set") {
		t.Errorf("error %v, want one naming the unset variable", err)
	}
}
