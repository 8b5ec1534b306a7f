//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import (
	"errors"
	"os"
)

// cbreak is not available here: agentctl reads whole lines, as the terminal echoes them.
func cbreak(*os.File) (restore func(), err error) {
	return nil, errors.ErrUnsupported
}
