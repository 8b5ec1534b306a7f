package main

import (
	"fmt"
	"net"
	"net/http"
	"regexp"
	"runtime/debug"
	"strings"

	"github.com/agentd/agentd/runtime/llm/demo"
)

// startup is what agentd says first in text logs, in one line for a person: where it
// serves, and which agent on which model. JSON logs do without it: their listening
// records say the same to machines.
type startup struct {
	version string
	grpc    string // the gRPC listener's address, as a client on this machine dials it
	tls     bool
	console string // the web console's URL, or "" without --http-listen
	agent   string // the default agent
	model   string // its model's name
	agents  int
}

// newStartup describes d serving on lis as cfg says, and with --http-listen on httpLis
// (hs; else both are nil).
func newStartup(d *daemon, cfg config, lis net.Listener, hs *http.Server, httpLis net.Listener) startup {
	s := startup{version: shortVersion(), grpc: dialAddr(lis.Addr()), tls: cfg.tlsCert != "", agents: len(d.agents.List())}
	if hs != nil {
		scheme := "http"
		if hs.TLSConfig != nil {
			scheme = "https"
		}
		s.console = scheme + "://" + dialAddr(httpLis.Addr()) + "/"
	}
	if a, err := d.agents.Agent(""); err == nil && a != nil {
		s.agent, s.model = a.Name, a.Runtime.Model().Name()
	}
	return s
}

// String is the line, such as "agentd v1.2.3 serving gRPC on localhost:50051 · console
// http://localhost:8080/ · agent demo on the built-in demo model (…)".
func (s startup) String() string {
	var b strings.Builder
	b.WriteString("agentd " + s.version + " serving gRPC")
	if s.tls {
		b.WriteString(" with TLS")
	}
	b.WriteString(" on " + s.grpc)
	if s.console != "" {
		b.WriteString(" · console " + s.console)
	} else {
		b.WriteString(" · no web console (--http-listen localhost:8080 serves one)")
	}
	if s.agent == "" {
		return b.String()
	}
	if s.agents > 1 {
		fmt.Fprintf(&b, " · %d agents, by default %s", s.agents, s.agent)
	} else {
		b.WriteString(" · agent " + s.agent)
	}
	if s.model == demo.ModelName {
		b.WriteString(" on the built-in demo model (--model or --config for a real one)")
	} else {
		b.WriteString(" on " + s.model)
	}
	return b.String()
}

// dialAddr is addr as a client on this machine dials it: localhost for the IPv4
// loopback address and for every interface.
func dialAddr(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok && (tcp.IP.IsUnspecified() || tcp.IP.Equal(net.IPv4(127, 0, 0, 1))) {
		return net.JoinHostPort("localhost", fmt.Sprint(tcp.Port))
	}
	return addr.String()
}

// pseudoVersion matches the end of a module pseudo-version (a build of a commit, not of a
// tag), such as v0.0.0-20261201190000-4f2a9c1d0b7e+dirty.
var pseudoVersion = regexp.MustCompile(`\d{14}-[0-9a-f]{12}(\+dirty)?$`)

// shortVersion is agentd's module version, or for a build of a commit "devel" and the
// commit: the version without the rest of internal/version's String.
func shortVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" && !pseudoVersion.MatchString(v) {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "devel@" + s.Value[:12]
		}
	}
	return "devel"
}
