// Command testserver is an MCP server over standard input and output for the tests of
// package mcp. Its tools exercise what a client must handle: results of every kind,
// errors, slowness, a crash, and changes to the tool list.
//
// When the file named by TESTSERVER_REFUSE exists, it exits at once with status 2, so
// that a test can make restarts fail.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text"`
}

type sleepIn struct {
	Millis int `json:"millis"`
}

type exitIn struct {
	Code int `json:"code"`
}

type nameIn struct {
	Name string `json:"name"`
}

type addOut struct {
	Sum int `json:"sum"`
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

// png is a 1x1 PNG image.
var png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")

func main() {
	log.SetFlags(0)
	if f := os.Getenv("TESTSERVER_REFUSE"); f != "" {
		if _, err := os.Stat(f); err == nil {
			log.Printf("testserver: refusing to start: %s exists", f)
			os.Exit(2)
		}
	}
	log.Printf("testserver: started, pid %d", os.Getpid())
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	s := mcp.NewServer(&mcp.Implementation{Name: "testserver", Version: "v1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes text.", Annotations: readOnly},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two integers.", Annotations: readOnly},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "image", Description: "Returns a 1x1 PNG.", Annotations: readOnly},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: png, MIMEType: "image/png"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("it failed, as it always does")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleeps, or until cancelled.", Annotations: readOnly},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.Millis) * time.Millisecond):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "exit", Description: "Makes the server exit."},
		func(_ context.Context, _ *mcp.CallToolRequest, in exitIn) (*mcp.CallToolResult, any, error) {
			log.Printf("testserver: exiting with status %d as asked", in.Code)
			os.Exit(in.Code)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "Returns the process id.", Annotations: readOnly},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(os.Getpid())}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "getenv", Description: "Returns an environment variable.", Annotations: readOnly},
		func(_ context.Context, _ *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, any, error) {
			v, ok := os.LookupEnv(in.Name)
			if !ok {
				v = "<unset>"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: v}}}, nil, nil
		})
	destructive := true
	mcp.AddTool(s, &mcp.Tool{Name: "add_tool", Description: "Adds a tool of the given name.", Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive}},
		func(_ context.Context, _ *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: in.Name, Description: "Added at run time.", Annotations: readOnly},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added " + in.Name}}}, nil, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Printf("testserver: %v", err)
	}
}
