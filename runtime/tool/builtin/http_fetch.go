package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/runtime"
)

// HTTPFetchName is the name of the http_fetch tool, as the model calls it.
const HTTPFetchName = "http_fetch"

// The limits of http_fetch unless [WithFetchMaxBytes] and [WithFetchTimeout] say
// otherwise.
const (
	DefaultFetchMaxBytes = 1 << 20
	DefaultFetchTimeout  = 10 * time.Second
)

// maxRedirects bounds the redirects one fetch follows.
const maxRedirects = 10

// ErrHostNotAllowed is wrapped by the errors of http_fetch calls, and of their
// redirects, to a host that is not on the tool's allow-list.
var ErrHostNotAllowed = errors.New("host not allowed")

// FetchResult is the JSON output of http_fetch.
type FetchResult struct {
	// URL is the URL fetched last, after redirects.
	URL string `json:"url"`
	// Status is the HTTP status code; a status that is not 2xx is still a result.
	Status int `json:"status"`
	// ContentType is the response's media type, or the sniffed one when it names none.
	ContentType string `json:"content_type"`
	// Body is the body as text; for binary content, a short note instead.
	Body string `json:"body"`
	// Truncated says the body was longer than the tool's limit and was cut.
	Truncated bool `json:"truncated,omitempty"`
}

const httpFetchSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "url": {
      "type": "string",
      "description": "The http or https URL to fetch with GET.",
      "minLength": 1,
      "maxLength": 2048
    }
  },
  "required": ["url"],
  "additionalProperties": false
}`

// hostPattern is one entry of an allow-list: an exact host, or a suffix pattern
// ("*.example.com") matching the host's subdomains; with a port, only that port.
type hostPattern struct {
	host   string // lower case, without a trailing dot; for a suffix pattern ".example.com"
	suffix bool
	port   string // "" for any
}

func (p hostPattern) String() string {
	s := p.host
	if p.suffix {
		s = "*" + s
	}
	if p.port != "" {
		s = net.JoinHostPort(s, p.port)
	}
	return s
}

// parseHostPattern reads an allow-list entry: "example.com", "*.example.com",
// "127.0.0.1", "[::1]", each optionally with ":port".
func parseHostPattern(s string) (hostPattern, error) {
	raw := s
	s = strings.ToLower(strings.TrimSpace(s))
	if strings.Contains(s, "/") {
		return hostPattern{}, fmt.Errorf("%q: want a host name such as example.com or *.example.com, not a URL", raw)
	}
	var p hostPattern
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		h, port, err := net.SplitHostPort(s)
		if err != nil {
			if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
				return hostPattern{}, fmt.Errorf("%q: %v", raw, err)
			}
			h = s[1 : len(s)-1] // "[::1]" without a port
		} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return hostPattern{}, fmt.Errorf("%q: invalid port %q", raw, port)
		}
		s, p.port = h, port
	}
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		p.suffix, s = true, rest
	}
	s = strings.TrimSuffix(s, ".")
	switch {
	case s == "":
		return hostPattern{}, fmt.Errorf("%q: empty host", raw)
	case net.ParseIP(s) != nil:
		if p.suffix {
			return hostPattern{}, fmt.Errorf("%q: a * pattern needs a domain, not an IP address", raw)
		}
	case !validHostname(s):
		return hostPattern{}, fmt.Errorf("%q: want a host name such as example.com, *.example.com or an IP address, optionally with :port", raw)
	}
	if p.suffix {
		s = "." + s
	}
	p.host = s
	return p, nil
}

// validHostname reports whether s is made of DNS labels: letters, digits, '-' and '_'.
func validHostname(s string) bool {
	if len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

func (p hostPattern) match(host, port string) bool {
	if p.port != "" && p.port != port {
		return false
	}
	if p.suffix {
		return strings.HasSuffix(host, p.host)
	}
	return host == p.host
}

// fetcher is the http_fetch tool.
type fetcher struct {
	allow    []hostPattern
	maxBytes int64
	timeout  time.Duration
	client   *http.Client
	spec     runtime.ToolSpec
	hosts    string // allow, as text for the description and refusals
}

// HTTPFetch returns the http_fetch tool, which GETs an http or https URL whose host is
// on allowHosts and returns a [FetchResult]. An entry of allowHosts is a host name
// ("example.com"), a pattern matching every subdomain of a domain ("*.example.com", which
// does not match example.com itself), or an IP address ("127.0.0.1", "[::1]"); each may
// name a port ("example.com:8443"), and without one allows every port. An empty list
// refuses every fetch, with an error saying so. An entry that is none of these is an
// error.
//
// Redirects are followed (at most 10) only to http or https URLs on the list. The body
// is read up to [WithFetchMaxBytes] (1 MiB by default) and cut there, with Truncated
// set and a note at its end; the whole fetch takes at most [WithFetchTimeout] (10s by
// default). Text content (text/*, JSON, XML, JavaScript) is the body; an image within
// the limit is attached as [runtime.Media], and other binary content becomes a short
// note. A fetch that fails (a host not allowed, a refused redirect, no answer in time)
// is an error; an answer with any status is a result.
//
// A host name on the list is trusted with whatever it resolves to: the list is checked
// against URLs, not addresses. The tool's description names the allowed hosts, so the
// model knows what it may fetch. [WithFetchTransport] replaces the HTTP transport.
func HTTPFetch(allowHosts []string, opts ...Option) (runtime.Tool, error) {
	o := newOptions(opts)
	f := &fetcher{maxBytes: DefaultFetchMaxBytes, timeout: DefaultFetchTimeout}
	if o.fetchMaxBytes > 0 {
		f.maxBytes = o.fetchMaxBytes
	}
	if o.fetchTimeout > 0 {
		f.timeout = o.fetchTimeout
	}
	var errs []error
	for i, h := range allowHosts {
		p, err := parseHostPattern(h)
		if err != nil {
			errs = append(errs, fmt.Errorf("allow_hosts[%d] %w", i, err))
			continue
		}
		f.allow = append(f.allow, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", HTTPFetchName, err)
	}
	rt := o.fetchTransport
	if rt == nil {
		// No idle connections: a tool has no Close, and a kept connection would hold
		// goroutines for as long as the server keeps it open.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DisableKeepAlives = true
		rt = t
	}
	f.client = &http.Client{Transport: rt, CheckRedirect: f.checkRedirect}
	names := make([]string, len(f.allow))
	for i, p := range f.allow {
		names[i] = p.String()
	}
	f.hosts = strings.Join(names, ", ")
	allowed := f.hosts
	if allowed == "" {
		allowed = "none: every fetch is refused"
	}
	f.spec = runtime.ToolSpec{
		Name: HTTPFetchName,
		Description: "Fetches a web page or API response with HTTP GET and returns its status, content type " +
			"and body as text. Only these hosts may be fetched (*.domain means its subdomains): " + allowed +
			fmt.Sprintf(". Bodies longer than %d bytes are cut.", f.maxBytes),
		Parameters: []byte(httpFetchSchema),
		Parallel:   true,
	}
	return f, nil
}

func (f *fetcher) Spec() runtime.ToolSpec { return f.spec }

// check refuses a URL the tool may not fetch.
func (f *fetcher) check(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: only http and https URLs can be fetched", u.Redacted())
	}
	if u.Host == "" {
		return fmt.Errorf("%q: the URL has no host", u.Redacted())
	}
	if u.User != nil {
		return fmt.Errorf("%q: URLs with credentials cannot be fetched", u.Redacted())
	}
	if len(f.allow) == 0 {
		return fmt.Errorf("%w: %q: no host may be fetched, the tool's allow-list is empty", ErrHostNotAllowed, u.Hostname())
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	for _, p := range f.allow {
		if p.match(host, port) {
			return nil
		}
	}
	return fmt.Errorf("%w: %q is not on the allow-list (%s)", ErrHostNotAllowed, u.Host, f.hosts)
}

func (f *fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if err := f.check(req.URL); err != nil {
		return fmt.Errorf("redirect refused: %w", err)
	}
	return nil
}

// Execute fetches the call's URL.
func (f *fetcher) Execute(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
	var args struct {
		URL string `json:"url"`
	}
	if err := decodeArgs(call.Arguments, &args); err != nil {
		return runtime.Output{}, err
	}
	u, err := url.Parse(strings.TrimSpace(args.URL))
	if err != nil {
		return runtime.Output{}, fmt.Errorf("invalid URL: %w", err)
	}
	if err := f.check(u); err != nil {
		return runtime.Output{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return runtime.Output{}, fmt.Errorf("invalid URL: %w", err)
	}
	req.Header.Set("User-Agent", "agentd-http-fetch")
	resp, err := f.client.Do(req)
	if err != nil {
		return runtime.Output{}, f.explain(ctx, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.maxBytes+1))
	if err != nil {
		return runtime.Output{}, f.explain(ctx, fmt.Errorf("reading the body: %w", err))
	}
	res := FetchResult{URL: resp.Request.URL.Redacted(), Status: resp.StatusCode}
	if int64(len(body)) > f.maxBytes {
		body, res.Truncated = body[:f.maxBytes], true
	}
	mediaType, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mediaType == "" {
		mediaType, _, _ = mime.ParseMediaType(http.DetectContentType(body))
	}
	res.ContentType = mediaType

	var media []runtime.Media
	switch {
	case len(body) == 0:
	case isText(mediaType):
		if res.Truncated {
			body = dropPartialRune(body)
		}
		res.Body = strings.ToValidUTF8(string(body), "\uFFFD")
		if res.Truncated {
			res.Body += fmt.Sprintf("\n[http_fetch: the body is longer than %d bytes and was cut there]", f.maxBytes)
		}
	case strings.HasPrefix(mediaType, "image/") && !res.Truncated:
		media = append(media, runtime.Media{MIMEType: mediaType, Data: body, URI: res.URL})
		res.Body = fmt.Sprintf("[http_fetch: %s image of %d bytes, attached]", mediaType, len(body))
	case res.Truncated:
		res.Body = fmt.Sprintf("[http_fetch: binary content (%s) of more than %d bytes, not shown]", mediaType, f.maxBytes)
	default:
		res.Body = fmt.Sprintf("[http_fetch: binary content (%s) of %d bytes, not shown]", mediaType, len(body))
	}
	out, err := jsonOutput(res)
	if err != nil {
		return runtime.Output{}, err
	}
	out.Media = media
	return out, nil
}

// explain words a failed fetch for the model.
func (f *fetcher) explain(ctx context.Context, err error) error {
	if errors.Is(err, ErrHostNotAllowed) {
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err // "redirect refused: host not allowed: …", without the URL twice
		}
		return err
	}
	if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no complete answer within %v: %w", f.timeout, context.DeadlineExceeded)
	}
	return err
}

// dropPartialRune drops a UTF-8 sequence cut short at the end of b.
func dropPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// isText reports whether a media type is text a model can read.
func isText(mediaType string) bool {
	switch {
	case strings.HasPrefix(mediaType, "text/"),
		strings.HasSuffix(mediaType, "+json"), strings.HasSuffix(mediaType, "+xml"):
		return true
	}
	switch mediaType {
	case "application/json", "application/xml", "application/javascript", "application/ecmascript",
		"application/x-javascript", "application/x-www-form-urlencoded", "application/yaml",
		"application/x-yaml", "application/toml", "application/x-ndjson", "application/graphql":
		return true
	}
	return false
}
