import AgentCore

/// An SSH session's environment: AgentCore's ``SessionVariables/base`` with the client's
/// `env` requests (less the ones the reference strips), under every command's layers
/// (``CommandEnvironment``); then `SSH_CLIENT`, `SSH_CONNECTION` (the reference's fixed
/// dummies), and with a terminal `TERM` and `SSH_TTY`.
struct SessionEnvironmentBuilder: Sendable {
    /// Client variables the reference strips (they select session types and containers).
    static let stripped: Set<String> = ["CODER_SSH_SESSION_TYPE", "CODER_CONTAINER", "CODER_CONTAINER_USER"]
    /// At most this many client `env` requests are kept per session (more are refused).
    static let maxClientVariables = 256
    /// A client variable's name and value together, at most.
    static let maxClientVariableBytes = 32 << 10
    /// All of a session's client variables together, at most (execve refuses much more
    /// anyway): 64 sessions a connection cannot hold 8 MiB each.
    static let maxClientVariablesTotal = 64 << 10

    var agent: [String: String]
    var manifest: AgentManifest?
    var command: CommandEnvironment
    var user: String
    var shell: String

    func build(client: [(name: String, value: String)], terminal: (term: String, tty: String)?) -> [String: String] {
        let base = SessionVariables.base(
            agent: agent, client: client.filter { !Self.stripped.contains($0.name) }, manifest: [:], user: user, shell: shell)
        var environment = command.apply(to: base, manifest: manifest)
        environment["SSH_CLIENT"] = "0.0.0.0 0 0"
        environment["SSH_CONNECTION"] = "0.0.0.0 0 0.0.0.0 0"
        if let terminal {
            environment["TERM"] = terminal.term
            environment["SSH_TTY"] = terminal.tty
        }
        return environment
    }

    /// The app name a session counts under (API 2.11): the last `CODER_SSH_SESSION_TYPE`
    /// sent, normalized as coderd stores it (``SessionCounts/normalized(_:)``); `ssh` without one.
    static func sessionName(client: [(name: String, value: String)]) -> String {
        guard let raw = client.last(where: { $0.name == "CODER_SSH_SESSION_TYPE" })?.value, !raw.isEmpty else { return "ssh" }
        return SessionCounts.normalized(raw)
    }

    /// The session type a client asked for with `CODER_SSH_SESSION_TYPE` (the last one
    /// sent, lowercased): `ssh`, `vscode` or `jetbrains`; anything else is `unknown`.
    static func sessionType(client: [(name: String, value: String)]) -> String {
        let requested = client.last { $0.name == "CODER_SSH_SESSION_TYPE" }?.value.lowercased() ?? ""
        switch requested {
        case "", "ssh": return "ssh"
        case "vscode", "jetbrains": return requested
        default: return "unknown"
        }
    }
}
