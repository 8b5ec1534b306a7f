package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// editorCommand is the editor a person chose: $VISUAL, else $EDITOR; "" for none.
func editorCommand(getenv func(string) string) string {
	if v := strings.TrimSpace(getenv("VISUAL")); v != "" {
		return v
	}
	return strings.TrimSpace(getenv("EDITOR"))
}

// editJSON opens argsJSON, indented, in editor (a command with optional arguments, such as
// "code --wait") and returns what the person saved, compacted. The editor gets the
// terminal when stdin and stdout are one; it reads nothing from other input.
func editJSON(ctx context.Context, editor, argsJSON string, stdin io.Reader, stdout, stderr io.Writer) (string, error) {
	argv := strings.Fields(editor)
	if len(argv) == 0 {
		return "", errors.New("no editor")
	}
	f, err := os.CreateTemp("", "agentctl-arguments-*.json")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	var pretty bytes.Buffer
	if json.Indent(&pretty, []byte(argsJSON), "", "  ") != nil {
		pretty.Reset()
		pretty.WriteString(argsJSON)
	}
	pretty.WriteString("\n")
	if _, err := f.Write(pretty.Bytes()); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], f.Name())...)
	if in, ok := stdin.(*os.File); ok {
		cmd.Stdin = in // never a pipe agentctl reads: its copying goroutine would take the next answers
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w", editor, err)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return "", err
	}
	return compactJSON(string(b))
}

// compactJSON checks that s holds one JSON value and returns it without spaces.
func compactJSON(s string) (string, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(strings.TrimSpace(s))); err != nil {
		return "", fmt.Errorf("not valid JSON: %w", err)
	}
	return b.String(), nil
}

// jsonValue turns JSON text into the google.protobuf.Value an approval decision carries.
func jsonValue(s string) (*structpb.Value, error) {
	v := &structpb.Value{}
	if err := protojson.Unmarshal([]byte(s), v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	return v, nil
}
