package builtin

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// This file holds what http_fetch knows about host names and addresses: how the
// entries of an allow-list and the hosts of URLs are read, and which addresses are
// kept from the model unless the operator lists them.

// hostPattern is one entry of an allow-list: an exact host name, a suffix pattern
// ("*.example.com") matching the host's subdomains, or an IP prefix (an address is a
// prefix of full length); with a port, only that port.
type hostPattern struct {
	host   string       // names only: lower case, ASCII, no trailing dot; ".example.com" for a suffix
	suffix bool         // host is a suffix
	prefix netip.Prefix // addresses only: masked, IPv4-mapped IPv6 as IPv4; invalid for names
	port   string       // "" for any
}

func (p hostPattern) isIP() bool { return p.prefix.IsValid() }

func (p hostPattern) String() string {
	var s string
	switch {
	case p.isIP() && p.prefix.IsSingleIP():
		s = p.prefix.Addr().String()
	case p.isIP():
		s = p.prefix.String()
	case p.suffix:
		s = "*" + p.host
	default:
		s = p.host
	}
	if p.port != "" {
		s = net.JoinHostPort(s, p.port)
	}
	return s
}

// matchName reports whether the pattern allows the host name (normalised by
// [normaliseName]) on the port. An address pattern matches no name.
func (p hostPattern) matchName(name, port string) bool {
	if p.isIP() || p.port != "" && p.port != port {
		return false
	}
	if p.suffix {
		return strings.HasSuffix(name, p.host)
	}
	return name == p.host
}

// matchIP reports whether the pattern names the address, and whether it does on the
// port too. A cloud metadata address is named only by an entry of that one address: a
// range that happens to hold it does not open it.
func (p hostPattern) matchIP(ip netip.Addr, port string, metadata bool) (named, onPort bool) {
	if !p.isIP() || !p.prefix.Contains(ip) || metadata && !p.prefix.IsSingleIP() {
		return false, false
	}
	return true, p.port == "" || p.port == port
}

const (
	wantEntry = "want a host name such as example.com, *.example.com, an IP address such as 10.0.0.1 " +
		"or a CIDR prefix such as 10.0.0.0/8, the first three optionally with :port"
	notURL = "want a host name such as example.com or *.example.com, not a URL"
)

// parseHostPattern reads an allow-list entry: "example.com", "*.example.com",
// "127.0.0.1", "[::1]", each optionally with ":port", or a CIDR prefix such as
// "10.0.0.0/8" or "fd00::/8".
func parseHostPattern(raw string) (hostPattern, error) {
	s := strings.ToLower(strings.TrimSpace(raw))
	if s == "" {
		return hostPattern{}, fmt.Errorf("%q: empty host", raw)
	}
	if before, _, ok := strings.Cut(s, "/"); ok {
		if strings.Contains(s, "://") {
			return hostPattern{}, fmt.Errorf("%q: %s", raw, notURL)
		}
		if _, err := netip.ParseAddr(before); err != nil {
			return hostPattern{}, fmt.Errorf("%q: %s", raw, notURL)
		}
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return hostPattern{}, fmt.Errorf("%q: want a CIDR prefix such as 10.0.0.0/8 or fd00::/8, with no port or zone", raw)
		}
		if m := pfx.Masked(); m != pfx {
			return hostPattern{}, fmt.Errorf("%q: the address has bits set past the first %d; the prefix is %s", raw, pfx.Bits(), m)
		}
		return hostPattern{prefix: unmapPrefix(pfx)}, nil
	}
	var p hostPattern
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		h, port, err := splitHostPort(s)
		if err != nil {
			return hostPattern{}, fmt.Errorf("%q: %v", raw, err)
		}
		s, p.port = h, port
	}
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		p.suffix, s = true, rest
	}
	if ip, err := netip.ParseAddr(s); err == nil {
		switch {
		case p.suffix:
			return hostPattern{}, fmt.Errorf("%q: a * pattern needs a domain, not an IP address", raw)
		case ip.Zone() != "":
			return hostPattern{}, fmt.Errorf("%q: an IPv6 address with a zone (%%%s) cannot be listed", raw, ip.Zone())
		}
		ip = ip.Unmap()
		p.prefix = netip.PrefixFrom(ip, ip.BitLen())
		return p, nil
	}
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return hostPattern{}, fmt.Errorf("%q: empty host", raw)
	}
	if !validHostname(s) {
		return hostPattern{}, fmt.Errorf("%q: %s", raw, wantEntry)
	}
	if p.suffix {
		s = "." + s
	}
	p.host = s
	return p, nil
}

// splitHostPort splits "host:port" or "[ipv6]:port" and checks the port; "[ipv6]"
// alone has no port.
func splitHostPort(s string) (host, port string, err error) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		return s[1 : len(s)-1], "", nil
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", "", errors.New("missing port")
	}
	host, port = s[:i], s[i+1:]
	if strings.HasPrefix(host, "[") {
		if !strings.HasSuffix(host, "]") {
			return "", "", errors.New("missing ']' in address")
		}
		host = host[1 : len(host)-1]
	}
	if !validPort(port) {
		return "", "", fmt.Errorf("invalid port %q", port)
	}
	return host, port, nil
}

// validPort reports whether s is a decimal port number from 1 to 65535.
func validPort(s string) bool {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return false
	}
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
		n = n*10 + int(r-'0')
	}
	return n <= 65535
}

// validHostname reports whether s is made of DNS labels of letters, digits, '-' and
// '_', and is not numeric at its end: "127.1" and "0x7f.1" are addresses to some
// resolvers, never names.
func validHostname(s string) bool {
	if len(s) > 253 {
		return false
	}
	var last string
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
		last = label
	}
	return strings.Trim(last, "0123456789") != "" && !strings.HasPrefix(last, "0x")
}

// parseHost reads the host of a URL, or of an address the transport dials: an IP
// address (without a zone, IPv4-mapped IPv6 as IPv4), or a host name in the form
// [hostPattern.matchName] compares, lower case and without a trailing dot. Host names
// are compared as the URL gives them: one that is not ASCII is refused rather than
// mapped, since the mapping (IDNA) could turn it into a name the list does not mean.
func parseHost(host string) (name string, ip netip.Addr, err error) {
	if strings.Contains(host, "%") {
		if ip, err := netip.ParseAddr(host); err == nil && ip.Zone() != "" {
			return "", netip.Addr{}, fmt.Errorf("%s is an IPv6 address with a zone, which cannot be fetched", host)
		}
		return "", netip.Addr{}, fmt.Errorf("%q holds a %%, which no host name or address does", host)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return "", ip, nil
	}
	for _, r := range host {
		if r >= 0x80 {
			return "", netip.Addr{}, fmt.Errorf("%q is not ASCII: write the host name in its punycode form (xn--…)", host)
		}
	}
	name = strings.TrimSuffix(strings.ToLower(host), ".")
	if !validHostname(name) {
		return "", netip.Addr{}, fmt.Errorf("%q is neither a host name nor an IP address", host)
	}
	return name, netip.Addr{}, nil
}

// unmapPrefix returns an IPv4-mapped IPv6 prefix (::ffff:10.0.0.0/104) as the IPv4
// prefix it covers (10.0.0.0/8), since addresses are compared unmapped.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}

// special says what kind of address ip is when it is one the model may not reach
// unless the operator lists it: loopback, private, link-local and the like, cloud
// metadata endpoints (metadata is then true), and IPv6 forms that embed such an IPv4
// address. It returns "" for an address anyone may fetch.
func special(ip netip.Addr) (kind string, metadata bool) {
	ip = ip.Unmap().WithZone("") // a prefix contains no address with a zone
	if ip.Is4() {
		return special4(ip)
	}
	for _, r := range [...]struct{ prefix, kind string }{
		{"fd00:ec2::254/128", "a cloud metadata address"},
		{"::/128", "an unspecified address"},
		{"::1/128", "a loopback address"},
		{"fe80::/10", "a link-local address"},
		{"fec0::/10", "a site-local address"},
		{"fc00::/7", "a private address"},
		{"ff00::/8", "a multicast address"},
		{"100::/64", "a discard-only address"},
		{"64:ff9b:1::/48", "a local-use NAT64 address"},
	} {
		if netip.MustParsePrefix(r.prefix).Contains(ip) {
			return r.kind, r.kind == "a cloud metadata address"
		}
	}
	// Forms that carry an IPv4 address, which a gateway or the host's own stack may
	// reach for them: each is as closed as the address it carries.
	b := ip.As16()
	for _, e := range [...]struct {
		prefix string
		v4     [4]byte
		form   string
	}{
		{"::ffff:0:0:0/96", [4]byte(b[12:16]), "an IPv4-translated address"},
		{"64:ff9b::/96", [4]byte(b[12:16]), "a NAT64 address"},
		{"2002::/16", [4]byte(b[2:6]), "a 6to4 address"},
		{"2001::/32", [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}, "a Teredo address"}, // the client's, inverted
		{"::/96", [4]byte(b[12:16]), "an IPv4-compatible address"},
	} {
		if !netip.MustParsePrefix(e.prefix).Contains(ip) {
			continue
		}
		if kind, metadata := special4(netip.AddrFrom4(e.v4)); kind != "" {
			return e.form + " holding " + kind, metadata
		}
		return "", false
	}
	return "", false
}

func special4(ip netip.Addr) (kind string, metadata bool) {
	for _, r := range [...]struct{ prefix, kind string }{
		{"169.254.169.254/32", "a cloud metadata address"}, // AWS, GCP, Azure, OCI, DigitalOcean…
		{"169.254.170.2/32", "a cloud metadata address"},   // AWS ECS task metadata
		{"100.100.100.200/32", "a cloud metadata address"}, // Alibaba Cloud
		{"168.63.129.16/32", "a cloud metadata address"},   // Azure host platform
		{"0.0.0.0/32", "an unspecified address"},
		{"0.0.0.0/8", `a "this network" address`},
		{"127.0.0.0/8", "a loopback address"},
		{"10.0.0.0/8", "a private address"},
		{"172.16.0.0/12", "a private address"},
		{"192.168.0.0/16", "a private address"},
		{"169.254.0.0/16", "a link-local address"},
		{"100.64.0.0/10", "a shared (CGNAT) address"},
		{"192.0.0.0/24", "an IETF protocol address"},
		{"198.18.0.0/15", "a benchmarking address"},
		{"224.0.0.0/4", "a multicast address"},
		{"240.0.0.0/4", "a reserved address"}, // 255.255.255.255, broadcast, among them
	} {
		if netip.MustParsePrefix(r.prefix).Contains(ip) {
			return r.kind, r.kind == "a cloud metadata address"
		}
	}
	return "", false
}
