import AgentCore
import Crypto
import NIOCore
import NIOSSH

/// What the SSH server reads of a client's own bytes, for the fuzz targets (`Fuzz/`,
/// `make fuzz`): an exec request's command (shell words, `#!` lines, the file-transfer
/// check), the environment built from `env` requests, the rewriter's view of decrypted
/// messages, the AES-GCM transport's opening of a client's packets, and the Xauthority file
/// X11 forwarding extends. It exists for the fuzz targets only.
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

    /// A client's packet as the server's AES-GCM transport opens it, with fixed keys:
    /// `packet` (what the client encrypts: padding length, payload, padding) sealed as a
    /// client seals it, or, `sealed`, taken as already sealed (its first four bytes the
    /// length). The payload handed on (through the rewriter), or nil when it is refused.
    public static func openPacket(_ packet: [UInt8], sealed: Bool) -> [UInt8]? {
        let key = SymmetricKey(data: [UInt8](repeating: 7, count: 16))
        let iv = [UInt8](repeating: 9, count: 12)
        let keys = NIOSSHSessionKeys(
            initialInboundIV: iv, initialOutboundIV: iv, inboundEncryptionKey: key, outboundEncryptionKey: key,
            inboundMACKey: key, outboundMACKey: key)
        guard let server = try? InterposingAES128GCM(initialKeys: keys) else { return nil }
        var wire = ByteBuffer()
        if sealed {
            wire.writeBytes(packet)
        } else {
            let length = withUnsafeBytes(of: UInt32(packet.count).bigEndian, Array.init)
            guard let box = try? AES.GCM.seal(packet, using: key, nonce: AES.GCM.Nonce(data: iv), authenticating: length) else { return nil }
            wire.writeBytes(length)
            wire.writeBytes(box.ciphertext)
            wire.writeBytes(box.tag)
        }
        return (try? server.decryptAndVerifyRemainingPacket(&wire, sequenceNumber: 0)).map { Array($0.readableBytesView) }
    }

    /// The Xauthority entries in `bytes`, encoded again; nil when they do not parse.
    public static func xauthority(_ bytes: [UInt8]) -> [UInt8]? {
        XAuthority.parse(bytes).map { $0.flatMap(\.encoded) }
    }
}
