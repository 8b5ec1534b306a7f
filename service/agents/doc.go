// Package agents builds the agents an agentd server offers from its agents file
// (agentd --config, AGENTD_CONFIG): the file's schema ([Config], read by [LoadFile]), the
// catalogue of tools an agent can name, model resolution ([ModelResolver], with the
// built-in demo and workload models and the openai and anthropic providers), the MCP
// servers agents take tools from, and each agent's hooks. [Default] is what a server
// offers without a file.
//
// [NewRegistry] checks a Config and builds a [Registry], which implements
// service.Agents: pass it as service.Config.Agents. When an MCP server's tools change,
// the registry builds the agents that use it again.
//
// The package imports package service for the types it hands the server (service.Agent,
// service.ToolInfo, service.ErrAgentNotFound): the agents file is one way to make
// service.Agents, and the service defines what it serves, so that it never imports the
// agents file's dependencies (the provider SDKs, MCP, YAML). This goes beyond the import
// rule of agentd's design, which lets service/agents import runtime, runtime/llm/*,
// runtime/tool/* and hooks/* alone.
package agents
