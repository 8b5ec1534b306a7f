package mcp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/runtime/tool/mcp"
)

func TestStreamableHTTP(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "web", Version: "v1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "lookup", Description: "Looks up.", InputSchema: map[string]any{"type": "object"}, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "found"}}}, nil
		})
	var mu sync.Mutex
	auth := map[string]bool{}
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth[r.Header.Get("Authorization")] = true
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	defer ts.Close()

	// The context bounds only the connecting.
	ctx, cancel := context.WithCancel(t.Context())
	src, err := mcp.Connect(ctx, mcp.ServerConfig{
		Name:    "web",
		URL:     ts.URL,
		Headers: map[string]string{"Authorization": "Bearer t0ken"},
	}, mcp.WithLogger(quiet), mcp.WithBackoff(5*time.Millisecond, 20*time.Millisecond))
	cancel()
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer src.Close()
	changed := make(chan struct{}, 10)
	src.OnToolsChanged(func() { changed <- struct{}{} })

	if out, err := call(t, find(t, src.Tools(), "lookup"), `{}`); err != nil || out.Text != "found" {
		t.Errorf("lookup: %+v, %v", out, err)
	}
	srv.AddTool(&sdk.Tool{Name: "more", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "more"}}}, nil
	})
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no change reported")
	}
	if diff := cmp.Diff([]string{"lookup", "more"}, names(src.Tools())); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if out, err := call(t, find(t, src.Tools(), "more"), `{}`); err != nil || out.Text != "more" {
		t.Errorf("more: %+v, %v", out, err)
	}

	// A session the server forgets is reestablished; calls fail meanwhile.
	for ss := range srv.Sessions() {
		ss.Close()
	}
	eventually(t, "the session is reestablished", func() bool {
		out, err := call(t, find(t, src.Tools(), "lookup"), `{}`)
		if err != nil && !errors.Is(err, mcp.ErrUnavailable) {
			t.Fatalf("lookup while reconnecting: %v, want ErrUnavailable", err)
		}
		return err == nil && out.Text == "found"
	})

	if err := src.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(map[string]bool{"Bearer t0ken": true}, auth); diff != "" {
		t.Errorf("Authorization headers seen (-want +got):\n%s", diff)
	}
}
