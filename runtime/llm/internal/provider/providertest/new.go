package providertest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
)

// TestNew: a model is named after its provider and model, New fails without a model,
// and the environment stands in for an empty key and base URL.
func TestNew(t *testing.T, a Adapter) {
	t.Run("name", func(t *testing.T) {
		m, _, _ := a.model(t, Config{Model: "model-b"})
		if got, want := m.Name(), a.Provider+":model-b"; got != want {
			t.Errorf("Name() = %q, want %q", got, want)
		}
	})
	t.Run("no model", func(t *testing.T) {
		t.Setenv(a.EnvAPIKey, "")
		t.Setenv(a.EnvBaseURL, "")
		if _, err := a.New(Config{}); err == nil {
			t.Error("New without a model succeeded")
		}
	})
	t.Run("environment", func(t *testing.T) {
		// Behind a proxy: the base URL has a path of its own.
		srv := ssetest.New(t, "/proxy"+a.Path, sse("text.sse"))
		t.Setenv(a.EnvAPIKey, Key)
		t.Setenv(a.EnvBaseURL, srv.URL+"/proxy")
		m := a.mustNew(t, Config{Model: a.Model, HTTPClient: srv.Client()})
		got, err := ssetest.Collect(t, t.Context(), m, Hello)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a.Text, got); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer "+Key {
			t.Errorf("Authorization = %q", got)
		}
	})
}
