package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/tool/builtin"
)

// fetchServer serves the paths the http_fetch tests fetch, and counts the requests.
func fetchServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("hello from " + r.Host))
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"answer":42}`))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		// "é" is two bytes: a cut at an odd length falls inside one.
		w.Write([]byte(strings.Repeat("é", 100)))
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such page", http.StatusNotFound)
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0, 1, 2, 3, 4})
	})
	mux.HandleFunc("/image", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\nfake"))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts, &hits
}

func fetch(t *testing.T, tool runtime.Tool, rawURL string) (builtin.FetchResult, runtime.Output, error) {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"url": rawURL})
	out, err := execute(t, tool, string(args))
	var res builtin.FetchResult
	if err == nil {
		if jerr := json.Unmarshal(out.JSON, &res); jerr != nil {
			t.Fatalf("output %s: %v", out.String(), jerr)
		}
	}
	return res, out, err
}

func newFetch(t *testing.T, hosts []string, opts ...builtin.Option) runtime.Tool {
	t.Helper()
	tool, err := builtin.HTTPFetch(hosts, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func TestHTTPFetch(t *testing.T) {
	ts, _ := fetchServer(t)
	tool := newFetch(t, []string{"127.0.0.1"})

	res, out, err := fetch(t, tool, ts.URL+"/text")
	want := builtin.FetchResult{URL: ts.URL + "/text", Status: 200, ContentType: "text/plain", Body: "hello from " + strings.TrimPrefix(ts.URL, "http://")}
	if err != nil || out.IsError {
		t.Fatalf("fetch: %v, %+v", err, out)
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}

	res, _, err = fetch(t, tool, ts.URL+"/json")
	if err != nil || res.ContentType != "application/json" || res.Body != `{"answer":42}` {
		t.Errorf("json: %+v, %v", res, err)
	}
	// A status that is not 2xx is a result, not a failure.
	res, _, err = fetch(t, tool, ts.URL+"/missing")
	if err != nil || res.Status != 404 || !strings.Contains(res.Body, "no such page") {
		t.Errorf("missing: %+v, %v", res, err)
	}
	res, out, err = fetch(t, tool, ts.URL+"/binary")
	if err != nil || res.Body != "[http_fetch: binary content (application/octet-stream) of 5 bytes, not shown]" || len(out.Media) != 0 {
		t.Errorf("binary: %+v, %v", res, err)
	}
	res, out, err = fetch(t, tool, ts.URL+"/image")
	if err != nil || len(out.Media) != 1 || out.Media[0].MIMEType != "image/png" || string(out.Media[0].Data) != "\x89PNG\r\n\x1a\nfake" {
		t.Errorf("image: %+v, media %+v, %v", res, out.Media, err)
	}
	if spec := tool.Spec(); spec.Name != builtin.HTTPFetchName || !strings.Contains(spec.Description, "127.0.0.1") || !spec.Parallel {
		t.Errorf("spec: %+v", spec)
	}
}

func TestHTTPFetchRefuses(t *testing.T) {
	ts, hits := fetchServer(t)
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	localhost := "http://localhost:" + strconv.Itoa(port)
	tests := []struct {
		name  string
		hosts []string
		url   string
		want  string // part of the error
		isNot bool   // the error wraps ErrHostNotAllowed
	}{
		{"host not on the list", []string{"127.0.0.1"}, localhost + "/text", `host not allowed: "localhost:` + strconv.Itoa(port) + `" is not on the allow-list (127.0.0.1)`, true},
		{"empty list", nil, ts.URL + "/text", "no host may be fetched, the tool's allow-list is empty", true},
		{"other port", []string{"127.0.0.1:1"}, ts.URL + "/text", "is not on the allow-list (127.0.0.1:1)", true},
		{"redirect off the list", []string{"127.0.0.1"}, ts.URL + "/redirect?to=" + url.QueryEscape(localhost+"/text"), `redirect refused: host not allowed: "localhost:`, true},
		{"redirect to another scheme", []string{"127.0.0.1"}, ts.URL + "/redirect?to=" + url.QueryEscape("ftp://127.0.0.1/x"), "redirect refused: \"ftp://127.0.0.1/x\": only http and https URLs can be fetched", false},
		{"file URL", []string{"127.0.0.1"}, "file:///etc/passwd", "only http and https URLs can be fetched", false},
		{"no scheme", []string{"127.0.0.1"}, "127.0.0.1/text", "only http and https URLs can be fetched", false},
		{"credentials", []string{"127.0.0.1"}, "http://user:secret@127.0.0.1/", "URLs with credentials cannot be fetched", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := hits.Load()
			_, out, err := fetch(t, newFetch(t, tt.hosts), tt.url)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("fetch: %+v, %v; want an error with %q", out, err, tt.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the URL's password: %v", err)
			}
			if got := errors.Is(err, builtin.ErrHostNotAllowed); got != tt.isNot {
				t.Errorf("errors.Is(%v, ErrHostNotAllowed) = %v, want %v", err, got, tt.isNot)
			}
			// Only a redirect's first request reaches the server.
			want := int64(0)
			if strings.HasPrefix(tt.name, "redirect") {
				want = 1
			}
			if n := hits.Load() - before; n != want {
				t.Errorf("%d requests reached the server, want %d", n, want)
			}
		})
	}
}

func TestHTTPFetchRedirectOnTheList(t *testing.T) {
	ts, _ := fetchServer(t)
	port := strconv.Itoa(ts.Listener.Addr().(*net.TCPAddr).Port)
	tool := newFetch(t, []string{"127.0.0.1", "localhost:" + port})
	res, _, err := fetch(t, tool, ts.URL+"/redirect?to="+url.QueryEscape("http://localhost:"+port+"/text"))
	if err != nil || res.URL != "http://localhost:"+port+"/text" || res.Body != "hello from localhost:"+port {
		t.Errorf("redirect: %+v, %v", res, err)
	}
}

func TestHTTPFetchLimits(t *testing.T) {
	ts, _ := fetchServer(t)
	tool := newFetch(t, []string{"127.0.0.1"}, builtin.WithFetchMaxBytes(11), builtin.WithFetchTimeout(50*time.Millisecond))

	res, _, err := fetch(t, tool, ts.URL+"/big")
	// 11 bytes hold five "é" and half of the sixth, which is dropped.
	want := strings.Repeat("é", 5) + "\n[http_fetch: the body is longer than 11 bytes and was cut there]"
	if err != nil || !res.Truncated || res.Body != want {
		t.Errorf("big: %+v, %v; want the body cut to %q", res, err, want)
	}

	start := time.Now()
	_, out, err := fetch(t, tool, ts.URL+"/slow")
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no complete answer within 50ms") {
		t.Errorf("slow: %+v, %v; want the time limit's error", out, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("slow fetch took %v", d)
	}
}

// TestHTTPFetchPatterns checks which hosts a list allows, over a transport that sends
// every request to the test server, whatever its host.
func TestHTTPFetchPatterns(t *testing.T) {
	ts, _ := fetchServer(t)
	transport := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, ts.Listener.Addr().String())
		},
	}
	tool := newFetch(t, []string{"*.example.test", "Exact.Example.ORG.", "api.example.net:8443", "[::1]"}, builtin.WithFetchTransport(transport))
	for rawURL, allowed := range map[string]bool{
		"http://a.example.test/text":        true,
		"https://a.example.test/text":       true, // fails later: the test server speaks no TLS
		"http://b.a.example.test/text":      true,
		"http://example.test/text":          false,
		"http://badexample.test/text":       false,
		"http://exact.example.org/text":     true,
		"http://EXACT.example.org./text":    true,
		"http://www.exact.example.org/text": false,
		"http://api.example.net:8443/text":  true,
		"http://api.example.net/text":       false,
		"http://[::1]:9/text":               true,
	} {
		t.Run(rawURL, func(t *testing.T) {
			_, _, err := fetch(t, tool, rawURL)
			if refused := errors.Is(err, builtin.ErrHostNotAllowed); refused == allowed {
				t.Errorf("fetch: %v; want allowed %v", err, allowed)
			}
		})
	}
}

func TestHTTPFetchBadAllowList(t *testing.T) {
	for _, h := range []string{"https://example.com", "*", "*.", "*.127.0.0.1", "example.com:99999", "exa mple.com", "-bad.com", ""} {
		t.Run(h, func(t *testing.T) {
			_, err := builtin.HTTPFetch([]string{"ok.example.com", h})
			if err == nil || !strings.HasPrefix(err.Error(), "http_fetch: allow_hosts[1] ") {
				t.Errorf("HTTPFetch(%q): %v, want an error naming allow_hosts[1]", h, err)
			}
		})
	}
}
