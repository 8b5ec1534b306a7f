// Package agents builds the agents an agentd server offers from its agents file
// (agentd --config, AGENTD_CONFIG): the file's schema ([Config], read by [LoadFile]), the
// catalogue of tools an agent can name, model resolution ([ModelResolver], with the
// built-in demo and workload models and the openai and anthropic providers), the MCP
// servers agents take tools from, and each agent's hooks. [Default] is what a server
// offers without a file.
//
// [NewRegistry] checks a Config and builds a [Registry], which implements
// runs.Agents (service.Agents is the same type): pass it as service.Config.Agents. When
// an MCP server's tools change, the registry builds the agents that use it again.
//
// The package imports the run engine (service/runs) for the types it hands the server
// (runs.Agent, runs.ToolInfo, runs.ErrAgentNotFound), never package service: the agents
// file is one way to make runs.Agents, and the engine defines what it runs, so that
// neither imports the agents file's dependencies (the provider SDKs, MCP, YAML).
package agents
