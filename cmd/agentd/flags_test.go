package main

import (
	"errors"
	"io"
	"log/slog"
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

// --log-format picks the handler: text or json as asked, json on what is not a
// terminal by default (a pipe, a file, a collector), and nothing else is taken.
func TestLogFormat(t *testing.T) {
	var b strings.Builder
	for format, want := range map[string]string{"text": "level=INFO msg=hello", "json": `"msg":"hello"`, "": `"msg":"hello"`} {
		b.Reset()
		slog.New(logHandler(format, &b, nil)).Info("hello")
		if !strings.Contains(b.String(), want) {
			t.Errorf("--log-format %q logged %q, want %q in it", format, b.String(), want)
		}
	}
	if _, err := parseConfig([]string{"--log-format", "yaml"}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "want text or json") {
		t.Errorf("--log-format yaml: %v, want it refused", err)
	}
}
