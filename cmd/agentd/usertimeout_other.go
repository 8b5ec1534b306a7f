//go:build !linux

package main

import (
	"net"
	"time"
)

// setTCPUserTimeout does nothing where TCP_USER_TIMEOUT does not exist.
func setTCPUserTimeout(*net.TCPConn, time.Duration) error { return nil }
