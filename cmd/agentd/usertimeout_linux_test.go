package main

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpUserTimeout reads c's TCP_USER_TIMEOUT.
func tcpUserTimeout(t *testing.T, c *net.TCPConn) time.Duration {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ms int
	var serr error
	if err := raw.Control(func(fd uintptr) { ms, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return time.Duration(ms) * time.Millisecond
}
