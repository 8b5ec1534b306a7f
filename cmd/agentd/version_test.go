package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// --version asks for the version, and nothing else; AGENTD_VERSION, which an image may
// well set to its tag, is not the flag.
func TestVersionFlag(t *testing.T) {
	if _, err := parseConfig([]string{"--version"}, env(nil), io.Discard); !errors.Is(err, errVersion) {
		t.Errorf("--version: %v, want errVersion", err)
	}
	if _, err := parseConfig(nil, env(map[string]string{"AGENTD_VERSION": "1.4.2"}), io.Discard); err != nil {
		t.Errorf("AGENTD_VERSION=1.4.2: %v, want it ignored", err)
	}
	var usage strings.Builder
	parseConfig([]string{"-h"}, env(nil), &usage)
	if !strings.Contains(usage.String(), "-version") {
		t.Errorf("-h does not list -version:\n%s", usage.String())
	}
}
