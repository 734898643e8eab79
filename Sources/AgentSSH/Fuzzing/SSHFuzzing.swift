import AgentCore

/// What the SSH server reads of a client's own text (the fuzz targets' entry points): an
/// exec request's command (shell words, `#!` lines, the file-transfer check) and the
/// environment built from `env` requests.
public enum SSHFuzzing {
    /// The argv a command runs as, its shell words and whether it counts as a file transfer.
    public static func command(_ text: String) -> (argv: [String], words: [String], fileTransfer: Bool) {
        (SessionCommand(shell: "/bin/sh", command: text).argv, SessionCommand.shellWords(text), SSHPolicy.isFileTransfer(text))
    }

    /// The environment for `client` variables over a fixed agent and manifest environment,
    /// and the session type they select.
    public static func environment(_ client: [(name: String, value: String)]) -> (environment: [String: String], type: String) {
        let builder = SessionEnvironmentBuilder(
            agent: ["PATH": "/usr/bin:/bin", "AGENT": "a"], manifest: ["CODER": "true"], user: "u", shell: "/bin/sh")
        return (builder.build(client: client, terminal: ("xterm", "/dev/pts/0")), SessionEnvironmentBuilder.sessionType(client: client))
    }
}
