package agents_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/service/agents"
)

// A YAML syntax error names the file, and the line and column of the text the parser
// could not take, not the line where the enclosing block starts (yaml's own, counted
// from 0: an item key indented one space too few on line 4 came out as "line 1").
func TestLoadFileSyntaxErrorPlace(t *testing.T) {
	const head = "agents:\n  - name: ops\n    model: demo\n"
	for _, tc := range []struct {
		name, yaml string
		want       string // the error, after the file's name
	}{{
		name: "key indented one space too few",
		yaml: head + "   description: x\n",
		want: ":4:4: YAML syntax error: did not find expected '-' indicator; check the indentation of line 4 against the lines above it",
	}, {
		name: "key at the items' indentation",
		yaml: head + "  description: x\n",
		want: ":4:3: YAML syntax error: did not find expected '-' indicator; check the indentation of line 4 against the lines above it",
	}, {
		name: "nested key indented one space too few",
		yaml: head + "    policy:\n      approval: ask\n     tools: {}\n",
		want: ":6:6: YAML syntax error: did not find expected key; check the indentation of line 6 against the lines above it",
	}, {
		name: "an error in the middle of a line",
		yaml: head + "    description: \"café: x\" y\n  - name: b\n    model: demo\n",
		want: ":4:28: YAML syntax error: did not find expected key",
	}, {
		name: "key indented too far",
		yaml: head + "      description: x\n",
		want: ":4:18: YAML syntax error: mapping values are not allowed in this context",
	}, {
		name: "tab",
		yaml: head + "\tdescription: x\n",
		want: ":4:1: YAML syntax error: found a tab character that violates indentation",
	}, {
		name: "CRLF",
		yaml: strings.ReplaceAll(head+"   description: x\n", "\n", "\r\n"),
		want: ":4:4: YAML syntax error: did not find expected '-' indicator",
	}, {
		name: "unclosed quote",
		yaml: head + "    description: \"x\n  - name: b\n    model: demo\n",
		want: ":4:18: YAML syntax error: found unexpected end of stream",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agents.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := agents.LoadFile(path)
			if err == nil {
				t.Fatal("LoadFile succeeded")
			}
			if got := strings.TrimPrefix(err.Error(), path); !strings.HasPrefix(got, tc.want) {
				t.Errorf("LoadFile:\n got %s%s\nwant %s%s", path, got, path, tc.want)
			}
		})
	}
}
