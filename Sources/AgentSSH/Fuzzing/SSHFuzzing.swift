import AgentCore
import NIOCore

/// What the SSH server reads of a client's own bytes, for the fuzz targets (`Fuzz/`,
/// `make fuzz`): an exec request's command (shell words, `#!` lines, the file-transfer
/// check), the environment built from `env` requests, the rewriter's view of decrypted
/// messages, and the Xauthority file X11 forwarding extends. It exists for the fuzz targets
/// only.
public enum SSHFuzzing {
    /// The argv a command runs as, its shell words and whether it counts as a file transfer.
    public static func command(_ text: String) -> (argv: [String], words: [String], fileTransfer: Bool) {
        (SessionCommand(shell: "/bin/sh", command: text).argv, SessionCommand.shellWords(text), SSHPolicy.isFileTransfer(text))
    }

    /// The environment for `client` variables over a fixed agent and manifest environment,
    /// and the session type they select.
    public static func environment(_ client: [(name: String, value: String)]) -> (environment: [String: String], type: String) {
        let builder = SessionEnvironmentBuilder(
            agent: ["PATH": "/usr/bin:/bin", "AGENT": "a"], manifest: AgentManifest(directory: "", environment: ["CODER": "true"]),
            command: CommandEnvironment(executable: "/agent"), user: "u", shell: "/bin/sh")
        return (builder.build(client: client, terminal: ("xterm", "/dev/pts/0")), SessionEnvironmentBuilder.sessionType(client: client))
    }

    /// A decrypted message as the rewriter passes it to swift-nio-ssh, and that result as it
    /// would leave the agent.
    public static func rewrite(_ message: [UInt8]) -> (inbound: [UInt8], outbound: [UInt8]) {
        var rewriter = SSHMessageRewriter()
        let inbound = rewriter.inbound(ByteBuffer(bytes: message))
        let outbound = rewriter.outbound(inbound)
        return (Array(inbound.readableBytesView), Array(outbound.readableBytesView))
    }

    /// The Xauthority entries in `bytes`, encoded again; nil when they do not parse.
    public static func xauthority(_ bytes: [UInt8]) -> [UInt8]? {
        XAuthority.parse(bytes).map { $0.flatMap(\.encoded) }
    }
}
