// The system helpers AgentCore is built on, visible to every module that imports AgentCore
// (hashing today). Modules that need no part of the module contract import AgentSystem alone.
@_exported import AgentSystem
