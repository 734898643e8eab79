import AgentCore
import Crypto
import NIOSSH

/// The server's host key: Ed25519, derived from the reference's seed (FNV-1a 64 over owner,
/// workspace and agent names, NUL-separated), so it survives rebuilds of the workspace as
/// the reference's does. The reference derives an RSA key from the seed with Go's
/// `math/rand`; swift-nio-ssh serves no RSA host keys, and Coder's clients ignore the host
/// key (`coder ssh` checks none; `config-ssh` writes `StrictHostKeyChecking=no`), so a
/// stable key of another type serves them the same.
enum SSHHostKey {
    /// The reference's seed for a workspace's names.
    static func seed(owner: String, workspace: String, agent: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let bytes = Array(owner.utf8) + [0] + Array(workspace.utf8) + [0] + Array(agent.utf8)
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }

    /// The Ed25519 key for `seed`: SHA-256 of a fixed label and the seed's 8 bytes is the
    /// private key's 32 bytes.
    static func key(seed: Int64) -> NIOSSHPrivateKey {
        var material = Array("workspace-agent ssh host key v1".utf8)
        withUnsafeBytes(of: seed.littleEndian) { material += $0 }
        let digest = SHA256.hash(data: material)
        let key = try! Curve25519.Signing.PrivateKey(rawRepresentation: Array(digest))
        return NIOSSHPrivateKey(ed25519Key: key)
    }

    /// The key for the manifest's names; without a manifest, the key of empty names (a
    /// standalone agent is one workspace of its own).
    static func key(for manifest: AgentManifest?) -> NIOSSHPrivateKey {
        key(seed: seed(owner: manifest?.ownerName ?? "", workspace: manifest?.workspaceName ?? "", agent: manifest?.agentName ?? ""))
    }
}
