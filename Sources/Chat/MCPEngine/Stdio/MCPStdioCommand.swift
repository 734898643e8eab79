import AgentCore

/// How a stdio MCP server is started: the program found on `PATH`, its argv, the
/// environment built for it, and its working directory.
public struct MCPStdioCommand: Sendable, Equatable {
    /// The `.mcp.json` name, which tags its stderr lines.
    public var serverName: String
    public var executable: String
    /// The argv, `argv[0]` being the command as written.
    public var arguments: [String]
    public var environment: [String: String]
    public var directory: String

    public init(serverName: String, executable: String, arguments: [String], environment: [String: String], directory: String) {
        self.serverName = serverName
        self.executable = executable
        self.arguments = arguments
        self.environment = environment
        self.directory = directory
    }

    /// Variables a server never gets, whatever its entry says: every `CODER_AGENT_*` (the
    /// agent's token, its token file, its URL and the rest of its own configuration). The
    /// reference hands servers the agent's environment with its token; a workspace's MCP
    /// server is third-party code and has no use for the agent's credentials.
    public static func isWithheld(_ name: String) -> Bool { name.hasPrefix("CODER_AGENT_") }

    /// The command for `config`: `environment` (the session environment) without the withheld
    /// variables, the entry's `env` over it (withheld names dropped there too), the program
    /// looked up on the result's `PATH`, run in `directory`.
    public static func make(_ config: MCPServerConfig, environment: [String: String], directory: String) throws(MCPError) -> MCPStdioCommand {
        guard !config.command.isEmpty else { throw MCPError(.start, "server \(goQuote(config.name)) has no command") }
        var env = environment.filter { !isWithheld($0.key) }
        for (key, value) in config.env where !isWithheld(key) && !key.isEmpty && !key.contains("=") {
            env[key] = value
        }
        guard let executable = ExecutableLookup.find(config.command, path: env["PATH"]),
            executable.hasPrefix("/") || config.command.contains("/")
        else {
            throw MCPError(.start, "exec: \(goQuote(config.command)): executable file not found in $PATH")
        }
        return MCPStdioCommand(
            serverName: config.name, executable: executable, arguments: [config.command] + config.args, environment: env, directory: directory)
    }
}
