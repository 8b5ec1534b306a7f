package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/agentd/agentd/web/console"
)

// An embedder that serves agentd's RPCs over HTTP itself mounts the console on the paths
// its RPCs do not take; the console calls the RPCs on the origin it was served from.
func ExampleHandler() {
	mux := http.NewServeMux()
	mux.Handle("/", console.Handler())
	// mux.Handle("/agentd.v1.AgentService/", the RPCs, through a Connect or gRPC-Web handler)

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output: 200 text/html; charset=utf-8
}
