package main

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// setTCPUserTimeout sets TCP_USER_TIMEOUT on c, as grpc.Server does for the connections it
// accepts when keepalive pings are on: data the peer does not acknowledge within d closes
// the connection. grpc.Server sets it only on a *net.TCPConn, which a connection of
// [connLimitListener] no longer is, so the listener sets it.
func setTCPUserTimeout(c *net.TCPConn, d time.Duration) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
