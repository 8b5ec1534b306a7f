package builtin_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentd/agentd/runtime/tool/builtin"
)

// secretServer is a server on the host's own network, listening on addr ("127.0.0.1:0",
// "[::1]:0"), that the model must not reach unless the allow-list names it. It counts
// the requests for /secret, answers "hello" elsewhere and redirects /redirect?to=URL.
type secretServer struct {
	*httptest.Server
	port    string
	secrets atomic.Int64 // requests for /secret
	all     atomic.Int64 // all requests
}

func newSecretServer(t *testing.T, addr string) *secretServer {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	s := &secretServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.all.Add(1)
		switch r.URL.Path {
		case "/secret":
			s.secrets.Add(1)
			w.Write([]byte("the secret"))
		case "/redirect":
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("hello"))
		}
	}))
	s.Listener.Close()
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	s.port = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	return s
}

func redirectTo(s *secretServer, to string) string {
	return s.URL + "/redirect?to=" + url.QueryEscape(to)
}

// TestHTTPFetchZoneBypass fetches IPv6 literals whose zone ends in an allowed suffix:
// the zone is no part of the address, so they named the loopback server while matching
// "*.example.com". They are refused before any connection, even where the address they
// hold is on the list, and the server sees no request for them.
func TestHTTPFetchZoneBypass(t *testing.T) {
	v4 := newSecretServer(t, "127.0.0.1:0")
	v6 := newSecretServer(t, "[::1]:0")
	mapped := "http://[::ffff:127.0.0.1%25.example.com]:" + v4.port + "/secret"
	loop6 := "http://[::1%25.example.com]:" + v6.port + "/secret"
	tests := []struct {
		name  string
		hosts []string
		url   string
		want  string
	}{
		{"mapped", []string{"*.example.com"}, mapped, "host not allowed: ::ffff:127.0.0.1%.example.com is an IPv6 address with a zone, which cannot be fetched"},
		{"loopback", []string{"*.example.com"}, loop6, "host not allowed: ::1%.example.com is an IPv6 address with a zone, which cannot be fetched"},
		{"mapped, address listed", []string{"*.example.com", "127.0.0.1"}, mapped, "with a zone, which cannot be fetched"},
		{"loopback, address listed", []string{"*.example.com", "::1"}, loop6, "with a zone, which cannot be fetched"},
		{"zone of an interface", []string{"*.example.com"}, "http://[fe80::1%25lo]:" + v6.port + "/secret", "fe80::1%lo is an IPv6 address with a zone"},
		{"redirect to mapped", []string{"*.example.com", "127.0.0.1:" + v4.port}, redirectTo(v4, mapped), "redirect refused: host not allowed: ::ffff:127.0.0.1%.example.com is an IPv6 address with a zone"},
		{"redirect to loopback", []string{"*.example.com", "127.0.0.1:" + v4.port}, redirectTo(v4, loop6), "redirect refused: host not allowed: ::1%.example.com is an IPv6 address with a zone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, out, err := fetch(t, newFetch(t, tt.hosts), tt.url)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, builtin.ErrHostNotAllowed) {
				t.Errorf("fetch: %+v, %v; want an ErrHostNotAllowed error with %q", out, err, tt.want)
			}
			if n := v4.secrets.Load() + v6.secrets.Load(); n != 0 {
				t.Errorf("the server saw %d requests for /secret, want none", n)
			}
		})
	}
}

// fakeNet is the network of the tests that resolve names: lookup answers from a table,
// and every connection goes to one server, whatever address it was dialed for, so that
// a check that is missing shows as a request that reaches the server.
type fakeNet struct {
	to string // the server's address

	mu      sync.Mutex
	answers map[string][][]string // by host: the answer of each lookup; the last repeats
	lookups map[string]int
	dialed  []string
}

func newFakeNet(to string, answers map[string][][]string) *fakeNet {
	return &fakeNet{to: to, answers: answers, lookups: map[string]int{}}
}

func (n *fakeNet) lookup(_ context.Context, host string) ([]netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	answers, ok := n.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(n.lookups[host], len(answers)-1)
	n.lookups[host]++
	var addrs []netip.Addr
	for _, a := range answers[i] {
		addrs = append(addrs, netip.MustParseAddr(a))
	}
	return addrs, nil
}

func (n *fakeNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	n.dialed = append(n.dialed, addr)
	n.mu.Unlock()
	return (&net.Dialer{}).DialContext(ctx, network, n.to)
}

func (n *fakeNet) dialedAddrs() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.dialed)
}

func (n *fakeNet) options() []builtin.Option {
	return []builtin.Option{builtin.WithFetchLookup(n.lookup), builtin.WithFetchDial(n.dial)}
}

// TestHTTPFetchAddresses fetches URLs whose host is an IP address: a name pattern never
// matches one, and an address of the host's own network or of a cloud's metadata
// service is refused, saying what it is, unless an address entry names it. Nothing is
// dialed for a refused address.
func TestHTTPFetchAddresses(t *testing.T) {
	srv := newSecretServer(t, "127.0.0.1:0")
	tests := []struct {
		hosts []string
		url   string
		want  string // the error; "" for a fetch that reaches the server
	}{
		{[]string{"*.example.com"}, "http://127.0.0.1:" + srv.port + "/secret", "host not allowed: 127.0.0.1 is a loopback address, which the allow-list does not name"},
		{[]string{"*.example.com"}, "http://127.0.0.2/secret", "127.0.0.2 is a loopback address"},
		{[]string{"*.example.com"}, "http://[::1]/secret", "::1 is a loopback address"},
		{[]string{"*.example.com"}, "http://[::ffff:127.0.0.1]:" + srv.port + "/secret", "::ffff:127.0.0.1 is a loopback address"},
		{[]string{"*.example.com"}, "http://[::ffff:7f00:1]/secret", "::ffff:7f00:1 is a loopback address"},
		{[]string{"*.example.com"}, "http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud metadata address, which the allow-list does not name"},
		{[]string{"*.example.com"}, "http://[::ffff:169.254.169.254]/latest/meta-data/", "::ffff:169.254.169.254 is a cloud metadata address"},
		{[]string{"*.example.com"}, "http://[fd00:ec2::254]/latest/meta-data/", "fd00:ec2::254 is a cloud metadata address"},
		{[]string{"*.example.com"}, "http://100.100.100.200/latest/meta-data/", "100.100.100.200 is a cloud metadata address"},
		{[]string{"*.example.com"}, "http://10.1.2.3/", "10.1.2.3 is a private address"},
		{[]string{"*.example.com"}, "http://172.16.0.1/", "172.16.0.1 is a private address"},
		{[]string{"*.example.com"}, "http://192.168.1.1/", "192.168.1.1 is a private address"},
		{[]string{"*.example.com"}, "http://[fd12::1]/", "fd12::1 is a private address"},
		{[]string{"*.example.com"}, "http://169.254.1.1/", "169.254.1.1 is a link-local address"},
		{[]string{"*.example.com"}, "http://[fe80::1]/", "fe80::1 is a link-local address"},
		{[]string{"*.example.com"}, "http://0.0.0.0:" + srv.port + "/secret", "0.0.0.0 is an unspecified address"},
		{[]string{"*.example.com"}, "http://[::]:" + srv.port + "/secret", ":: is an unspecified address"},
		{[]string{"*.example.com"}, "http://100.64.0.1/", "100.64.0.1 is a shared (CGNAT) address"},
		{[]string{"*.example.com"}, "http://224.0.0.1/", "224.0.0.1 is a multicast address"},
		{[]string{"*.example.com"}, "http://[ff02::1]/", "ff02::1 is a multicast address"},
		{[]string{"*.example.com"}, "http://[64:ff9b::7f00:1]/", "64:ff9b::7f00:1 is a NAT64 address holding a loopback address"},
		{[]string{"*.example.com"}, "http://[2002:a9fe:a9fe::]/", "2002:a9fe:a9fe:: is a 6to4 address holding a cloud metadata address"},
		{[]string{"*.example.com"}, "http://[::127.0.0.1]/", "::127.0.0.1 is an IPv4-compatible address holding a loopback address"},
		{[]string{"*.example.com"}, "http://8.8.8.8/", `host not allowed: "8.8.8.8" is not on the allow-list (*.example.com)`},
		{[]string{"*.example.com"}, "http://127.1:" + srv.port + "/secret", `"127.1" is neither a host name nor an IP address`},
		{[]string{"*.example.com"}, "http://2130706433:" + srv.port + "/secret", `"2130706433" is neither a host name nor an IP address`},
		{[]string{"*.example.com"}, "http://0x7f.0.0.1/", `"0x7f.0.0.1" is neither a host name nor an IP address`},
		{[]string{"*.example.com"}, "http://bücher.example.com/", `"bücher.example.com" is not ASCII: write the host name in its punycode form`},
		// An address entry names the addresses it holds, on its port if it has one.
		{[]string{"127.0.0.1"}, "http://127.0.0.1:" + srv.port + "/", ""},
		{[]string{"127.0.0.0/8"}, "http://127.0.0.1:" + srv.port + "/", ""},
		{[]string{"::ffff:127.0.0.1"}, "http://127.0.0.1:" + srv.port + "/", ""},
		{[]string{"127.0.0.1"}, "http://[::ffff:127.0.0.1]:" + srv.port + "/", ""},
		{[]string{"127.0.0.1:" + srv.port}, "http://127.0.0.1:" + srv.port + "/", ""},
		{[]string{"127.0.0.1:1"}, "http://127.0.0.1:" + srv.port + "/", `"127.0.0.1:` + srv.port + `" is not on the allow-list (127.0.0.1:1)`},
		{[]string{"10.0.0.0/8"}, "http://10.20.30.40/", ""},
		{[]string{"8.8.8.8"}, "http://8.8.8.8/", ""},
		// A metadata address needs an entry of its own: a range that holds it is not one.
		{[]string{"169.254.0.0/16"}, "http://169.254.169.254/", "169.254.169.254 is a cloud metadata address, which the allow-list does not name"},
		{[]string{"0.0.0.0/0"}, "http://169.254.169.254/", "169.254.169.254 is a cloud metadata address"},
		{[]string{"169.254.0.0/16"}, "http://169.254.1.1/", ""},
		{[]string{"169.254.169.254"}, "http://169.254.169.254/", ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.hosts, ",")+" "+tt.url, func(t *testing.T) {
			network := newFakeNet(srv.Listener.Addr().String(), nil)
			before := srv.all.Load()
			res, _, err := fetch(t, newFetch(t, tt.hosts, network.options()...), tt.url)
			if tt.want == "" {
				if err != nil || res.Body != "hello" {
					t.Errorf("fetch: %+v, %v; want the server's answer", res, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, builtin.ErrHostNotAllowed) {
				t.Errorf("fetch: %+v, %v; want an ErrHostNotAllowed error with %q", res, err, tt.want)
			}
			if d := network.dialedAddrs(); len(d) != 0 || srv.all.Load() != before {
				t.Errorf("dialed %q, and the server saw %d requests; want neither", d, srv.all.Load()-before)
			}
		})
	}
}

// TestHTTPFetchResolvedAddresses fetches names on the list whose addresses are the
// host's own or a metadata service's: the connection is refused when it is made, and
// goes only to an address that passed the check.
func TestHTTPFetchResolvedAddresses(t *testing.T) {
	srv := newSecretServer(t, "127.0.0.1:0")
	tests := []struct {
		answer []string // what the name resolves to
		hosts  []string // more entries than *.example.com
		want   string   // the error; "" for a fetch that reaches the server
		dialed []string // the addresses dialed, ports left out
	}{
		{answer: []string{"127.0.0.1"}, want: "host not allowed: name.example.com resolves to a loopback address, which the allow-list does not name"},
		{answer: []string{"::1"}, want: "resolves to a loopback address"},
		{answer: []string{"::ffff:127.0.0.1"}, want: "resolves to a loopback address"},
		{answer: []string{"169.254.169.254"}, want: "name.example.com resolves to a cloud metadata address, which the allow-list does not name"},
		{answer: []string{"fd00:ec2::254"}, want: "resolves to a cloud metadata address"},
		{answer: []string{"100.100.100.200"}, want: "resolves to a cloud metadata address"},
		{answer: []string{"10.0.0.1"}, want: "resolves to a private address"},
		{answer: []string{"fe80::1"}, want: "resolves to a link-local address"},
		{answer: []string{"::ffff:169.254.169.254"}, want: "resolves to a cloud metadata address"},
		{answer: []string{"64:ff9b::a00:1"}, want: "resolves to a NAT64 address holding a private address"},
		{answer: []string{"0.0.0.0"}, want: "resolves to an unspecified address"},
		{answer: []string{"127.0.0.1"}, hosts: []string{"127.0.0.1:1"}, want: "resolves to a loopback address, which the allow-list names for other ports than " + srv.port},
		{answer: []string{"169.254.169.254"}, hosts: []string{"169.254.0.0/16"}, want: "resolves to a cloud metadata address"},
		// A public address is anyone's; of several addresses, only the allowed are dialed.
		{answer: []string{"203.0.113.7"}, dialed: []string{"203.0.113.7"}},
		{answer: []string{"2001:db8::7"}, dialed: []string{"2001:db8::7"}},
		{answer: []string{"64:ff9b::cb00:7107"}, dialed: []string{"64:ff9b::cb00:7107"}},
		{answer: []string{"127.0.0.1", "203.0.113.7", "10.0.0.1"}, dialed: []string{"203.0.113.7"}},
		// The operator may open the host's own network, by address.
		{answer: []string{"127.0.0.1"}, hosts: []string{"127.0.0.1"}, dialed: []string{"127.0.0.1"}},
		{answer: []string{"127.0.0.1"}, hosts: []string{"127.0.0.0/8"}, dialed: []string{"127.0.0.1"}},
		{answer: []string{"::ffff:127.0.0.1"}, hosts: []string{"127.0.0.0/8"}, dialed: []string{"127.0.0.1"}},
		{answer: []string{"127.0.0.1"}, hosts: []string{"127.0.0.1:" + srv.port}, dialed: []string{"127.0.0.1"}},
		{answer: []string{"169.254.169.254"}, hosts: []string{"169.254.169.254"}, dialed: []string{"169.254.169.254"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.answer, ",")+" "+strings.Join(tt.hosts, ","), func(t *testing.T) {
			network := newFakeNet(srv.Listener.Addr().String(), map[string][][]string{"name.example.com": {tt.answer}})
			before := srv.all.Load()
			tool := newFetch(t, append([]string{"*.example.com"}, tt.hosts...), network.options()...)
			res, _, err := fetch(t, tool, "http://name.example.com:"+srv.port+"/")
			var dialed []string
			for _, a := range network.dialedAddrs() {
				host, _, _ := net.SplitHostPort(a)
				dialed = append(dialed, host)
			}
			if !slices.Equal(dialed, tt.dialed) {
				t.Errorf("dialed %q, want %q", dialed, tt.dialed)
			}
			if tt.want == "" {
				if err != nil || res.Body != "hello" {
					t.Errorf("fetch: %+v, %v; want the server's answer", res, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, builtin.ErrHostNotAllowed) {
				t.Errorf("fetch: %+v, %v; want an ErrHostNotAllowed error with %q", res, err, tt.want)
			}
			if n := srv.all.Load() - before; n != 0 {
				t.Errorf("the server saw %d requests, want none", n)
			}
		})
	}
}

// TestHTTPFetchResolvedLoopback resolves a name on the list to the loopback address of
// a real server, and dials for real: only an address entry opens it.
func TestHTTPFetchResolvedLoopback(t *testing.T) {
	srv := newSecretServer(t, "127.0.0.1:0")
	lookup := builtin.WithFetchLookup(newFakeNet("", map[string][][]string{"internal.example.com": {{"127.0.0.1"}}}).lookup)
	for _, tt := range []struct {
		hosts []string
		want  string // the error; "" for a fetch that reaches the server
	}{
		{[]string{"*.example.com"}, "host not allowed: internal.example.com resolves to a loopback address, which the allow-list does not name"},
		{[]string{"internal.example.com"}, "resolves to a loopback address"},
		{[]string{"*.example.com", "127.0.0.1"}, ""},
		{[]string{"*.example.com", "127.0.0.0/8"}, ""},
		{[]string{"*.example.com", "::1"}, "resolves to a loopback address"},
	} {
		t.Run(strings.Join(tt.hosts, ","), func(t *testing.T) {
			before := srv.secrets.Load()
			res, _, err := fetch(t, newFetch(t, tt.hosts, lookup), "http://internal.example.com:"+srv.port+"/secret")
			n := srv.secrets.Load() - before
			if tt.want == "" {
				if err != nil || res.Body != "the secret" || n != 1 {
					t.Errorf("fetch: %+v, %v, %d requests; want the server's answer", res, err, n)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, builtin.ErrHostNotAllowed) {
				t.Errorf("fetch: %+v, %v; want an ErrHostNotAllowed error with %q", res, err, tt.want)
			}
			if n != 0 {
				t.Errorf("the server saw %d requests for /secret, want none", n)
			}
		})
	}
}

// TestHTTPFetchRedirects follows redirects from an allowed public host to the host's own
// network: each is refused, by its URL or when it connects.
func TestHTTPFetchRedirects(t *testing.T) {
	srv := newSecretServer(t, "127.0.0.1:0")
	public := "http://www.example.com:" + srv.port
	tests := []struct {
		to   string
		want string
	}{
		{"http://127.0.0.1:" + srv.port + "/secret", "redirect refused: host not allowed: 127.0.0.1 is a loopback address, which the allow-list does not name"},
		{"http://[::ffff:127.0.0.1]:" + srv.port + "/secret", "redirect refused: host not allowed: ::ffff:127.0.0.1 is a loopback address"},
		{"http://[::ffff:127.0.0.1%25.example.com]:" + srv.port + "/secret", "redirect refused: host not allowed: ::ffff:127.0.0.1%.example.com is an IPv6 address with a zone"},
		{"http://169.254.169.254/latest/meta-data/", "redirect refused: host not allowed: 169.254.169.254 is a cloud metadata address"},
		{"http://internal.example.com:" + srv.port + "/secret", "host not allowed: internal.example.com resolves to a loopback address, which the allow-list does not name"},
		{"http://metadata.example.com/latest/meta-data/", "host not allowed: metadata.example.com resolves to a cloud metadata address"},
	}
	for _, tt := range tests {
		t.Run(tt.to, func(t *testing.T) {
			network := newFakeNet(srv.Listener.Addr().String(), map[string][][]string{
				"www.example.com":      {{"203.0.113.7"}},
				"internal.example.com": {{"127.0.0.1"}},
				"metadata.example.com": {{"169.254.169.254"}},
			})
			tool := newFetch(t, []string{"*.example.com"}, network.options()...)
			res, _, err := fetch(t, tool, public+"/redirect?to="+url.QueryEscape(tt.to))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, builtin.ErrHostNotAllowed) {
				t.Errorf("fetch: %+v, %v; want an ErrHostNotAllowed error with %q", res, err, tt.want)
			}
			if d := network.dialedAddrs(); !slices.Equal(d, []string{"203.0.113.7:" + srv.port}) {
				t.Errorf("dialed %q, want only the first host's address", d)
			}
			if n := srv.secrets.Load(); n != 0 {
				t.Errorf("the server saw %d requests for /secret, want none", n)
			}
		})
	}
}

// TestHTTPFetchRebinding resolves a name to a public address for its first connection
// and to the loopback address for its second, a redirect to the same host: the second
// is refused when it connects, since it is checked on its own answer.
func TestHTTPFetchRebinding(t *testing.T) {
	srv := newSecretServer(t, "127.0.0.1:0")
	network := newFakeNet(srv.Listener.Addr().String(), map[string][][]string{
		"rebind.example.com": {{"203.0.113.7"}, {"127.0.0.1"}},
	})
	tool := newFetch(t, []string{"*.example.com"}, network.options()...)
	base := "http://rebind.example.com:" + srv.port
	res, _, err := fetch(t, tool, base+"/redirect?to="+url.QueryEscape(base+"/secret"))
	want := "host not allowed: rebind.example.com resolves to a loopback address, which the allow-list does not name"
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, builtin.ErrHostNotAllowed) {
		t.Errorf("fetch: %+v, %v; want an ErrHostNotAllowed error with %q", res, err, want)
	}
	if d := network.dialedAddrs(); !slices.Equal(d, []string{"203.0.113.7:" + srv.port}) {
		t.Errorf("dialed %q, want only the public address", d)
	}
	if n := srv.secrets.Load(); n != 0 {
		t.Errorf("the server saw %d requests for /secret, want none", n)
	}
	// The name is not trusted for having resolved well once: a new fetch asks again.
	res, _, err = fetch(t, tool, base+"/secret")
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("second fetch: %+v, %v; want an error with %q", res, err, want)
	}
	if n := srv.secrets.Load(); n != 0 {
		t.Errorf("the server saw %d requests for /secret, want none", n)
	}
}

// TestHTTPFetchTransportStillChecksNames checks that a transport of the caller's still
// gets only the URLs the list allows, by name and by address.
func TestHTTPFetchTransportStillChecksNames(t *testing.T) {
	var seen []string
	var mu sync.Mutex
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		seen = append(seen, r.URL.Host)
		mu.Unlock()
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r, Header: http.Header{}}, nil
	})
	tool := newFetch(t, []string{"*.example.com", "10.0.0.0/8"}, builtin.WithFetchTransport(rt))
	for rawURL, allowed := range map[string]bool{
		"http://a.example.com/":                         true,
		"http://10.1.1.1/":                              true,
		"http://[::ffff:127.0.0.1%25.example.com]/":     false,
		"http://[::1%25.example.com]/":                  false,
		"http://127.0.0.1/":                             false,
		"http://169.254.169.254/":                       false,
		"http://[::ffff:10.1.1.1]/":                     true,
		"http://10.example.com.attacker.net/":           false,
		"http://a.example.com./":                        true,
		"http://A.EXAMPLE.COM/":                         true,
		"http://xn--bcher-kva.example.com/":             true,
		"http://b\u00fccher.example.com/":               false,
		"http://a.example.com%2f.attacker.net/":         false,
		"http://a.example.com\uff0eattacker.net/":       false,
		"http://127.0.0.1.example.com.attacker.net/":    false,
		"http://[64:ff9b::a01:101]/":                    false,
		"http://%5B::ffff:127.0.0.1%25.example.com%5D/": false,
	} {
		t.Run(rawURL, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			_, _, err := fetch(t, tool, rawURL)
			if allowed && err != nil || !allowed && !errors.Is(err, builtin.ErrHostNotAllowed) && !strings.Contains(fmt.Sprint(err), "invalid URL") {
				t.Errorf("fetch: %v; want allowed %v", err, allowed)
			}
			mu.Lock()
			defer mu.Unlock()
			if got := len(seen) == 1; got != allowed {
				t.Errorf("the transport saw %q; want a request %v", seen, allowed)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestHTTPFetchAllowList checks the entries HTTPFetch accepts, as the tool's
// description shows them, and the precise errors for those it refuses.
func TestHTTPFetchAllowList(t *testing.T) {
	tool, err := builtin.HTTPFetch([]string{"Example.COM.", "*.example.org:8443", "10.0.0.7", "[::1]:8080", "::ffff:10.0.0.8", "10.0.0.0/8", "FD00::/8", "::ffff:192.168.0.0/112"})
	if err != nil {
		t.Fatal(err)
	}
	want := "Only these hosts may be fetched (*.domain means its subdomains): example.com, *.example.org:8443, 10.0.0.7, [::1]:8080, 10.0.0.8, 10.0.0.0/8, fd00::/8, 192.168.0.0/16."
	if d := tool.Spec().Description; !strings.Contains(d, want) {
		t.Errorf("description %q, want it to hold %q", d, want)
	}
	for _, tt := range []struct{ entry, want string }{
		{"https://example.org/", `"https://example.org/": want a host name such as example.com or *.example.com, not a URL`},
		{"example.org/path", `"example.org/path": want a host name such as example.com or *.example.com, not a URL`},
		{"10.0.0.1/8", `"10.0.0.1/8": the address has bits set past the first 8; the prefix is 10.0.0.0/8`},
		{"10.0.0.0/33", `"10.0.0.0/33": want a CIDR prefix such as 10.0.0.0/8 or fd00::/8, with no port or zone`},
		{"10.0.0.0/8:80", `"10.0.0.0/8:80": want a CIDR prefix such as 10.0.0.0/8 or fd00::/8, with no port or zone`},
		{"fe80::/10%eth0", `"fe80::/10%eth0": want a CIDR prefix such as 10.0.0.0/8 or fd00::/8, with no port or zone`},
		{"fe80::1%eth0", `"fe80::1%eth0": an IPv6 address with a zone (%eth0) cannot be listed`},
		{"[fe80::1%eth0]:80", `"[fe80::1%eth0]:80": an IPv6 address with a zone (%eth0) cannot be listed`},
		{"*.10.0.0.1", `"*.10.0.0.1": a * pattern needs a domain, not an IP address`},
		{"127.1", `"127.1": want a host name such as example.com, *.example.com, an IP address such as 10.0.0.1 or a CIDR prefix such as 10.0.0.0/8`},
		{"example.com:0", `"example.com:0": invalid port "0"`},
		{"[::1", `"[::1": missing ']' in address`},
		{"bücher.example", `"bücher.example": want a host name such as example.com`},
	} {
		t.Run(tt.entry, func(t *testing.T) {
			_, err := builtin.HTTPFetch([]string{"ok.example.com", tt.entry})
			if want := "http_fetch: allow_hosts[1] " + tt.want; err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("HTTPFetch(%q): %v\nwant an error starting %q", tt.entry, err, want)
			}
		})
	}
}
