// The engine's users see the wire types (messages, results, errors, limits) as its own.
@_exported import MCPWire
