// The parts AgentCore is built on, visible to every module that imports AgentCore:
// AgentSystem (POSIX helpers, latches, blocking pools, hashing, backoff, sleep-or-signal) and AgentJSON (JSON and quoting). Modules
// that need no part of the module contract import those alone.
@_exported import AgentJSON
@_exported import AgentSystem
