// Package console is agentd's web console: a single-page application, built from the
// TypeScript in src/ (npm run build:console, at the repository root) into dist/, which is
// committed and embedded here, so that `go build` and `go install` need no Node. The build
// is pinned by package-lock.json and gives the same bytes every time; CI builds it again
// and checks that dist/ is unchanged. It talks to agentd over the Connect protocol on the
// HTTP listener it is served from (--http-listen). Its browser tests (test/, run by
// run-browser-tests.sh) drive Chromium against a real agentd.
package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed dist
var dist embed.FS

// Handler serves the console: dist's files, index.html for / (and for any path that
// names no file, so that a page's own paths survive a reload), each with an ETag of its
// content and no-cache (a browser revalidates, so a new agentd's console is never mixed
// with an old one's cached script), and headers that keep the page from being framed or
// loading anything from elsewhere.
func Handler() http.Handler {
	files, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // dist is embedded: it is there
	}
	etags := map[string]string{}
	_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		etags[p] = `"` + hex.EncodeToString(sum[:8]) + `"`
		return nil
	})
	server := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "agentd's console serves GET and HEAD; RPCs are POSTs to /agentd.v1.AgentService/<method>", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if _, ok := etags[name]; !ok || name == "" {
			name = "index.html"
			r = r.Clone(r.Context())
			r.URL.Path = "/"
		}
		h := w.Header()
		h.Set("ETag", etags[name])
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		server.ServeHTTP(w, r)
	})
}
