package providertest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
)

// TestKeyNotInErrors: the key goes in the Authorization header and nowhere else: not
// in the error's text, its fields, nor the SDK's error it wraps.
func TestKeyNotInErrors(t *testing.T, a Adapter) {
	m, srv, _ := a.model(t, Config{}, ssetest.JSONError(http.StatusUnauthorized, nil, a.Unauthorized))
	_, err := ssetest.Collect(t, t.Context(), m, Hello)
	for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", providerError(t, err).Err)} {
		if strings.Contains(s, Key) {
			t.Errorf("error text %q holds the API key", s)
		}
	}
	if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer "+Key {
		t.Errorf("Authorization = %q", got)
	}
}
