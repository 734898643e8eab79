import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The environment of every command the agent starts (SSH, the reconnecting PTY, scripts,
/// metadata, the process API) in the reference's precedence (`updateCommandEnv`).
//
// Lowest first: the predefined variables (`CODER=true`, the workspace's names and id,
// `CODER_AGENT_TOKEN`, `GIT_SSH_COMMAND`, `CS_DISABLE_GETTING_STARTED_OVERRIDE`,
// `VSCODE_PROXY_URI`); the caller's base (the agent's environment, a client's variables) only
// for names not predefined; the manifest's variables (expanded); the secrets' variables (raw);
// `GIT_ASKPASS`; then the scripts' bin directory first on `PATH`. MCP servers build theirs
// without the agent's credentials. One per agent, in `AgentContext`: the scripts module names
// its bin directory when it is built, and every module reads it when it starts a command.
public final class CommandEnvironment: Sendable {
    /// The agent's executable: `GIT_ASKPASS`, and `GIT_SSH_COMMAND` with `gitssh --`.
    public let executable: String
    /// False (`--hide-agent-token`): no command gets `CODER_AGENT_TOKEN` nor the agent's
    /// `CODER_AGENT_TOKEN_FILE`; the in-workspace commands then ask the agent over its socket
    /// instead of coderd.
    public let passesAgentToken: Bool
    /// Given to every command as `CODER_AGENT_SOCKET_PATH` when the token is not (the
    /// commands then find the agent that started them there).
    public let agentSocketPath: String?
    private let bin: Mutex<String?>

    /// - Parameter binDirectory: first on `PATH`; nil leaves `PATH` as the layers give it.
    public init(
        executable: String = CommandEnvironment.agentExecutable, binDirectory: String? = nil, passesAgentToken: Bool = true,
        agentSocketPath: String? = nil
    ) {
        self.executable = executable
        self.passesAgentToken = passesAgentToken
        self.agentSocketPath = agentSocketPath
        bin = Mutex(binDirectory)
    }

    /// The scripts' bin directory (`<script data dir>/coder-script-data/bin`), first on `PATH`.
    public var binDirectory: String? { bin.withLock { $0 } }

    /// Set by the scripts module when it is built, before any command starts.
    public func setBinDirectory(_ directory: String?) {
        bin.withLock { $0 = directory }
    }

    /// `/proc/self/exe` resolved (Go's `os.Executable`), read once; `argv[0]` if unreadable.
    public static let agentExecutable: String = readSymbolicLink("/proc/self/exe") ?? CommandLine.arguments.first ?? ""

    /// `base` with the manifest's layers over it; `base` unchanged without a manifest
    /// (standalone: no control plane, nothing to add).
    public func apply(to base: [String: String], manifest: AgentManifest?) -> [String: String] {
        // Hidden, the token's file is not named either (whoever can read it could act as the
        // agent); a template can still name one in its own variables.
        let hidden = passesAgentToken ? nil : Self.tokenFileVariable
        guard let manifest else {
            guard let hidden, base[hidden] != nil else { return base }
            return base.filter { $0.key != hidden }
        }
        var env = predefined(manifest)
        env.reserveCapacity(base.count + env.count + manifest.environment.count + manifest.commandSecrets.variables.count + 2)
        for (name, value) in base where env[name] == nil && name != hidden { env[name] = value }
        // `CODER=true` and the names again (``AgentManifest/environment`` holds them), then
        // the template's variables over everything before.
        for (name, value) in manifest.environment { env[name] = value }
        for (name, value) in manifest.commandSecrets.variables { env[name] = value }
        env["GIT_ASKPASS"] = executable
        if let binDirectory {
            // The reference's fallback is the agent's own PATH; an empty one is not joined
            // (a trailing `:` would put the working directory on PATH).
            let path = env["PATH"] ?? Self.processPATH()
            env["PATH"] = path.isEmpty ? binDirectory : binDirectory + ":" + path
        }
        return env
    }

    /// Where the agent's token may be read from (`--agent-token-file`).
    public static let tokenFileVariable = "CODER_AGENT_TOKEN_FILE"

    /// The first layer: what the agent defines for every command.
    public func predefined(_ manifest: AgentManifest) -> [String: String] {
        var env = [
            "CODER": "true",
            "CODER_WORKSPACE_NAME": manifest.workspaceName,
            "CODER_WORKSPACE_AGENT_NAME": manifest.agentName,
            "CODER_WORKSPACE_OWNER_NAME": manifest.ownerName,
            "CODER_WORKSPACE_ID": Self.uuidText(manifest.workspaceID),
            "GIT_SSH_COMMAND": executable + " gitssh --",
            "CS_DISABLE_GETTING_STARTED_OVERRIDE": "true",
        ]
        if passesAgentToken, let token = manifest.commandSecrets.sessionToken { env["CODER_AGENT_TOKEN"] = token }
        if !passesAgentToken, let agentSocketPath { env["CODER_AGENT_SOCKET_PATH"] = agentSocketPath }
        if !manifest.controlPlaneURL.isEmpty { env["CODER_AGENT_URL"] = manifest.controlPlaneURL }
        if !manifest.vsCodePortProxyURI.isEmpty { env["VSCODE_PROXY_URI"] = manifest.vsCodePortProxyURI }
        return env
    }

    private static func processPATH() -> String {
        getenv("PATH").map { String(cString: $0) } ?? ""
    }

    /// 16 bytes as lowercase UUID text; the nil UUID otherwise (Go prints a zero `uuid.UUID`).
    static func uuidText(_ bytes: [UInt8]) -> String {
        let value = bytes.count == 16 ? bytes : [UInt8](repeating: 0, count: 16)
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(36)
        for (index, byte) in value.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { out.append(UInt8(ascii: "-")) }
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
