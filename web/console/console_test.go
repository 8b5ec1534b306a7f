package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/agentd/agentd/web/console"
)

func get(t *testing.T, h http.Handler, method, path string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, vs := range header {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The page, at / and at any path that names no file, loads the script and the style
// sheet the build wrote, by absolute paths (a page at /runs/run_1 loads /app.js).
func TestHandlerServesThePageAndWhatItLoads(t *testing.T) {
	h := console.Handler()
	for _, path := range []string{"/", "/runs/run_1"} {
		resp := get(t, h, http.MethodGet, path, nil)
		page := body(t, resp)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("GET %s: %s %s, want the page", path, resp.Status, resp.Header.Get("Content-Type"))
		}
		refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page, -1)
		if len(refs) != 2 {
			t.Fatalf("GET %s: the page loads %q, want app.js and console.css", path, refs)
		}
		for _, m := range refs {
			ref := m[1]
			if !strings.HasPrefix(ref, "/") || strings.Contains(ref, "//") {
				t.Errorf("the page loads %q: want a path on its own origin from the root", ref)
			}
			want := map[string]string{"/app.js": "text/javascript", "/console.css": "text/css"}[ref]
			r := get(t, h, http.MethodGet, ref, nil)
			if r.StatusCode != http.StatusOK || want == "" || !strings.HasPrefix(r.Header.Get("Content-Type"), want) {
				t.Errorf("GET %s: %s %s, want %s", ref, r.Status, r.Header.Get("Content-Type"), want)
			}
		}
	}
}

// Every answer carries a CSP that allows nothing inline and nothing from elsewhere, and
// an ETag a browser revalidates with.
func TestHandlerHeaders(t *testing.T) {
	h := console.Handler()
	resp := get(t, h, http.MethodGet, "/app.js", nil)
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy %q allows something unsafe", csp)
	}
	if got := resp.Header.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("Cache-Control = %q, want no-cache", got)
	}
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	again := get(t, h, http.MethodGet, "/app.js", http.Header{"If-None-Match": {etag}})
	if again.StatusCode != http.StatusNotModified {
		t.Errorf("GET /app.js with If-None-Match %s: %s, want 304", etag, again.Status)
	}
}

func TestHandlerRefusesOtherMethods(t *testing.T) {
	resp := get(t, console.Handler(), http.MethodPost, "/", nil)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: %s, Allow %q; want 405, Allow GET, HEAD", resp.Status, resp.Header.Get("Allow"))
	}
}
