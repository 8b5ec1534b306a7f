package mcp_test

import (
	"context"
	"fmt"
	"log"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/tool/builtin"
	"github.com/agentd/agentd/runtime/tool/mcp"
)

// A server's tools, with the policy their annotations imply. The server runs in the
// same process here; a config names a command or a URL instead of WithTransport.
func Example() {
	ctx := context.Background()
	server := sdk.NewServer(&sdk.Implementation{Name: "files", Version: "v1"}, nil)
	type pathIn struct {
		Path string `json:"path"`
	}
	sdk.AddTool(server, &sdk.Tool{Name: "read_file", Description: "Reads a file.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in pathIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "contents of " + in.Path}}}, nil, nil
		})
	sdk.AddTool(server, &sdk.Tool{Name: "delete_file", Description: "Deletes a file."},
		func(context.Context, *sdk.CallToolRequest, pathIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "deleted"}}}, nil, nil
		})
	dial := func(ctx context.Context) (sdk.Transport, error) {
		client, srv := sdk.NewInMemoryTransports()
		if _, err := server.Connect(ctx, srv, nil); err != nil {
			return nil, err
		}
		return client, nil
	}

	src, err := mcp.Connect(ctx, mcp.ServerConfig{Name: "files"}, mcp.WithTransport(dial))
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	policy := src.Policy()
	for _, tool := range src.Tools() {
		name := tool.Spec().Name
		fmt.Println(name, "asks:", policy.For(name).Approval == runtime.ApprovalAsk)
	}
	out, err := src.Tools()[1].Execute(ctx, runtime.ToolCall{Arguments: `{"path":"notes.txt"}`})
	fmt.Println(out.Text, err)
	// Output:
	// delete_file asks: true
	// read_file asks: false
	// contents of notes.txt <nil>
}

// An agent with the built-in tools and two MCP servers: a process and an HTTP endpoint.
// Tools of the servers that clash with each other or with the built-in tools are
// namespaced; the agent is built again when a server's tools change.
func ExampleMerge() {
	ctx := context.Background()
	var model runtime.Model // the agent's model
	builtins := []string{builtin.CurrentTimeName, builtin.CalculateName, builtin.SaveNoteName}
	fs, err := mcp.Connect(ctx, mcp.ServerConfig{
		Name:    "fs",
		Command: "mcp-server-filesystem",
		Args:    []string{"/srv/data"},
		Timeout: 30 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer fs.Close()
	web, err := mcp.Connect(ctx, mcp.ServerConfig{
		Name:    "web",
		URL:     "https://mcp.example.com/mcp",
		Headers: map[string]string{"Authorization": "Bearer ..."},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer web.Close()

	build := func() (*runtime.Agent, error) {
		tools, policy := mcp.Merge(builtins, fs, web)
		for name, tp := range builtin.Policy().Tools {
			if policy.Tools == nil {
				policy.Tools = map[string]runtime.ToolPolicy{}
			}
			policy.Tools[name] = tp
		}
		return runtime.New(runtime.Config{
			Model:  model,
			Tools:  append(builtin.Tools(), tools...),
			Policy: policy,
		})
	}
	agent, err := build()
	if err != nil {
		log.Fatal(err)
	}
	_ = agent
	fs.OnToolsChanged(func() { /* build again, for the runs that start from now on */ })
}
