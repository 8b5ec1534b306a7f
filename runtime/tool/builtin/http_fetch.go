package builtin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
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

// fetcher is the http_fetch tool.
type fetcher struct {
	allow    []hostPattern
	maxBytes int64
	timeout  time.Duration
	client   *http.Client
	spec     runtime.ToolSpec
	hosts    string // allow, as text for the description and refusals

	// lookup and dial are the network of the default transport, which checks every
	// address it dials; they are seams for tests.
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
}

// HTTPFetch returns the http_fetch tool, which GETs an http or https URL whose host is
// on allowHosts and returns a [FetchResult]. An entry of allowHosts is one of
//
//   - a host name ("example.com");
//   - a pattern matching every subdomain of a domain ("*.example.com", which does not
//     match example.com itself);
//   - an IP address ("10.0.0.7", "::1" or "[::1]");
//   - a CIDR prefix ("10.0.0.0/8", "fd00::/8"), matching every address it holds.
//
// The first three may name a port ("example.com:8443", "[::1]:8080"); without one they
// allow every port. An empty list refuses every fetch, with an error saying so. An
// entry that is none of these is an error naming it.
//
// Host names in URLs are compared in one form: lower case, without a trailing dot, in
// ASCII as the URL gives them (a name that is not ASCII is refused: write it in
// punycode). A name pattern never matches an IP address: a URL that names an address
// ("http://10.0.0.7/", "http://[::1]/") is fetched only when an address or a prefix
// entry holds it, and an IPv6 address with a zone ("[fe80::1%25eth0]") is never
// fetched.
//
// The model cannot reach the host's own network through a name either. Unless an
// address or a prefix entry holds it, http_fetch refuses to connect to a loopback,
// private (RFC 1918, fc00::/7), link-local (169.254.0.0/16, fe80::/10), unspecified,
// multicast, shared (CGNAT, 100.64.0.0/10) or otherwise reserved address, and to an
// IPv4-mapped, IPv4-compatible, NAT64, 6to4 or Teredo address holding one of these.
// A cloud metadata address (169.254.169.254, fd00:ec2::254, 100.100.100.200,
// 168.63.129.16, 169.254.170.2) needs an entry of that very address: a prefix holding
// it is not enough. The check is made when the transport dials, on the addresses the
// name resolved to for that connection, and the connection goes to the address checked,
// so a name that resolves to a public address once and to a private one later (DNS
// rebinding) is refused the second time. Proxies from the environment are not used: a
// proxy would resolve the names itself.
//
// Redirects are followed (at most 10) only to http or https URLs the list allows, and
// their connections are checked like the first. The body is read up to
// [WithFetchMaxBytes] (1 MiB by default) and cut there, with Truncated set and a note at
// its end; the whole fetch takes at most [WithFetchTimeout] (10s by default). Text
// content (text/*, JSON, XML, JavaScript) is the body; an image within the limit is
// attached as [runtime.Media], and other binary content becomes a short note. A fetch
// that fails (a host not allowed, a refused redirect or address, no answer in time) is
// an error, wrapping [ErrHostNotAllowed] when the list refused it; an answer with any
// status is a result.
//
// [WithFetchTransport] replaces the HTTP transport, and with it the check of addresses
// at dial time: the host names and addresses in URLs, redirects included, are still
// checked as above, but where a name leads is then the transport's business. The
// tool's description names the allowed hosts, so the model knows what it may fetch.
func HTTPFetch(allowHosts []string, opts ...Option) (runtime.Tool, error) {
	o := newOptions(opts)
	f := &fetcher{maxBytes: DefaultFetchMaxBytes, timeout: DefaultFetchTimeout, lookup: o.fetchLookup, dial: o.fetchDial}
	if o.fetchMaxBytes > 0 {
		f.maxBytes = o.fetchMaxBytes
	}
	if o.fetchTimeout > 0 {
		f.timeout = o.fetchTimeout
	}
	if f.lookup == nil {
		f.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if f.dial == nil {
		f.dial = (&net.Dialer{}).DialContext
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
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		t.DialContext = f.dialContext
		// No idle connections: a tool has no Close, and a kept connection would hold
		// goroutines for as long as the server keeps it open.
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
		Idempotent: true, // it changes nothing: running it again is harmless
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
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	name, ip, err := parseHost(u.Hostname())
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrHostNotAllowed, err)
	case ip.IsValid():
		return f.checkIP(ip, port, u.Hostname(), u.Host)
	case f.nameAllowed(name, port):
		return nil
	}
	return fmt.Errorf("%w: %q is not on the allow-list (%s)", ErrHostNotAllowed, u.Host, f.hosts)
}

// nameAllowed reports whether a name entry of the list allows the host name on the port.
func (f *fetcher) nameAllowed(name, port string) bool {
	for _, p := range f.allow {
		if p.matchName(name, port) {
			return true
		}
	}
	return false
}

// named says whether an address entry of the list names ip on the port (allowed), or
// on other ports only (named).
func (f *fetcher) named(ip netip.Addr, port string, metadata bool) (allowed, named bool) {
	for _, p := range f.allow {
		n, onPort := p.matchIP(ip, port, metadata)
		if onPort {
			return true, true
		}
		named = named || n
	}
	return false, named
}

// checkIP refuses an address given as the host of a URL that no address entry of the
// list allows; the refusal names it as the URL wrote it, as addr (its host) or hostPort
// (its host and port).
func (f *fetcher) checkIP(ip netip.Addr, port, addr, hostPort string) error {
	ip = ip.Unmap()
	kind, metadata := special(ip)
	allowed, named := f.named(ip, port, metadata)
	switch {
	case allowed:
		return nil
	case kind != "" && !named:
		return fmt.Errorf("%w: %s is %s, which the allow-list does not name", ErrHostNotAllowed, addr, kind)
	}
	return fmt.Errorf("%w: %q is not on the allow-list (%s)", ErrHostNotAllowed, hostPort, f.hosts)
}

// checkResolved refuses an address a host name on the list resolved to, when it is one
// the list must name ([special]) and does not.
func (f *fetcher) checkResolved(name string, ip netip.Addr, port string) error {
	if ip.Zone() != "" {
		return fmt.Errorf("%w: %s resolves to an IPv6 address with a zone, which cannot be fetched", ErrHostNotAllowed, name)
	}
	ip = ip.Unmap()
	kind, metadata := special(ip)
	if kind == "" {
		return nil
	}
	allowed, named := f.named(ip, port, metadata)
	switch {
	case allowed:
		return nil
	case named:
		return fmt.Errorf("%w: %s resolves to %s, which the allow-list names for other ports than %s", ErrHostNotAllowed, name, kind, port)
	}
	return fmt.Errorf("%w: %s resolves to %s, which the allow-list does not name", ErrHostNotAllowed, name, kind)
}

// dialContext is the default transport's dialer. It checks the host again, resolves a
// name itself, and connects only to the addresses the list allows, by address, so
// that the address checked is the address connected to.
func (f *fetcher) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	name, ip, err := parseHost(host)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHostNotAllowed, err)
	}
	var ips []netip.Addr
	if ip.IsValid() {
		if err := f.checkIP(ip, port, host, addr); err != nil {
			return nil, err
		}
		ips = append(ips, ip.Unmap())
	} else {
		if !f.nameAllowed(name, port) {
			return nil, fmt.Errorf("%w: %q is not on the allow-list (%s)", ErrHostNotAllowed, addr, f.hosts)
		}
		found, err := f.lookup(ctx, host)
		if err != nil {
			return nil, err
		}
		var refused error
		for _, ip := range found {
			if err := f.checkResolved(name, ip, port); err != nil {
				refused = cmp.Or(refused, err)
				continue
			}
			ips = append(ips, ip.Unmap())
		}
		switch {
		case len(ips) > 0:
		case refused != nil:
			return nil, refused
		default:
			return nil, fmt.Errorf("lookup %s: no addresses", host)
		}
	}
	var first error
	for _, ip := range ips {
		c, err := f.dial(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		first = cmp.Or(first, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
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
