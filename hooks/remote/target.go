package remote

import (
	"net"
	"net/netip"
	"strings"
)

// isLocal reports whether the gRPC target names a hook server that only this machine
// reaches: a Unix socket, or host:port on a loopback address. It reads targets as
// grpc.NewClient does: a scheme it does not know (as in "localhost:7070") means the
// whole target is the address of the default "dns" scheme. A name other than
// "localhost" is not local, whatever it resolves to today.
func isLocal(target string) bool {
	scheme, rest, ok := strings.Cut(target, ":")
	if !ok {
		return localAddr(target)
	}
	switch strings.ToLower(scheme) {
	case "unix", "unix-abstract":
		return true
	case "dns", "passthrough":
		// dns://[authority]/host:port: the authority is a DNS server, not the hook's.
		if after, ok := strings.CutPrefix(rest, "//"); ok {
			_, rest, ok = strings.Cut(after, "/")
			if !ok {
				return false
			}
		}
		return localAddr(rest)
	case "ipv4", "ipv6":
		for addr := range strings.SplitSeq(rest, ",") {
			if !localAddr(addr) {
				return false
			}
		}
		return true
	}
	return localAddr(target)
}

// localAddr reports whether addr, host[:port], is on a loopback address. An empty host
// is, as for net.Dial and gRPC's resolver.
func localAddr(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if host == "" || strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
