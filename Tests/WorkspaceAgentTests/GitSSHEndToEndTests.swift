import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `GIT_SSH_COMMAND="<agent> gitssh --"`: a clone over SSH from OpenSSH's `sshd` on loopback
/// that accepts only the Coder git key the control-plane double hands out.
@Suite(.timeLimit(.minutes(3)))
struct GitSSHEndToEndTests {
    static let keyPath = ControlPlaneDouble.gitSSHKeyPath

    /// An sshd on 127.0.0.1 (as root: it needs privilege separation) whose only authorized key
    /// is `authorizedKey`.
    struct SSHDaemon {
        let server: ServerChild
        let port: Int

        static func start(directory: String, authorizedKey: String) async throws -> SSHDaemon {
            try TestFile.write(directory + "/authorized_keys", authorizedKey + "\n")
            let hostKey = await ChildProgram.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", directory + "/host_key"])
            try #require(hostKey.status == 0)
            try FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true)
            // A free port, then sshd on it; taken meanwhile by another test: try another.
            for _ in 0..<5 {
                let port = try Self.freePort()
                try TestFile.write(
                    directory + "/sshd_config",
                    """
                    Port \(port)
                    ListenAddress 127.0.0.1
                    HostKey \(directory)/host_key
                    AuthorizedKeysFile \(directory)/authorized_keys
                    StrictModes no
                    PubkeyAuthentication yes
                    PasswordAuthentication no
                    KbdInteractiveAuthentication no
                    UsePAM no
                    PermitRootLogin prohibit-password
                    PidFile none
                    LogLevel VERBOSE

                    """)
                let server = try ServerChild(["/usr/sbin/sshd", "-D", "-e", "-f", directory + "/sshd_config"], stderrToStdout: true)
                if await server.line(where: { $0.contains("Server listening on 127.0.0.1 port \(port)") || $0.contains("Cannot bind") || $0.contains("error") }) != nil,
                    server.all.contains(where: { $0.contains("Server listening") })
                {
                    return SSHDaemon(server: server, port: port)
                }
                server.stop()
            }
            throw SSHDaemonError()
        }

        struct SSHDaemonError: Error {}

        static func freePort() throws -> Int {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            try #require(bound == 0)
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
            return Int(UInt16(bigEndian: address.sin_port))
        }
    }

    /// A key pair made with ssh-keygen: (public, private).
    static func keyPair(_ path: String) async throws -> (String, String) {
        let made = await ChildProgram.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "coder", "-f", path])
        try #require(made.status == 0)
        return (try String(contentsOfFile: path + ".pub", encoding: .utf8), try String(contentsOfFile: path, encoding: .utf8))
    }

    static func withClone(
        servedKeyIsAuthorized: Bool, _ body: @escaping @Sendable (GitWorkspace, _ clone: @escaping @Sendable (_ viaGitSSH: Bool) async -> ChildProgram.Outcome, ControlPlaneDouble, _ servedPublicKey: String) async throws -> Void
    ) async throws {
        try #require(getuid() == 0, "sshd needs root for privilege separation (CI runs as root)")
        let workspace = try await GitWorkspace()
        defer { workspace.remove() }
        let (authorized, _) = try await keyPair(workspace.directory + "/authorized")
        let (servedPublic, servedPrivate) = servedKeyIsAuthorized ? try await keyPair(workspace.directory + "/served") : try await keyPair(workspace.directory + "/other")
        let sshd = try await SSHDaemon.start(directory: workspace.directory, authorizedKey: servedKeyIsAuthorized ? servedPublic.trimmingCharacters(in: .whitespacesAndNewlines) : authorized.trimmingCharacters(in: .whitespacesAndNewlines))
        defer { sshd.server.stop() }
        let double = ControlPlaneDouble()
        double.externalAuth.withLock { $0.gitSSHKey = (servedPublic, servedPrivate) }
        try await double.run { base in
            let user = String(cString: getpwuid(getuid()).pointee.pw_name)
            let url = "ssh://\(user)@127.0.0.1:\(sshd.port)\(workspace.repository)"
            let options = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -F /dev/null"
            let clone: @Sendable (Bool) async -> ChildProgram.Outcome = { viaGitSSH in
                let command = viaGitSSH ? "\(AgentDaemon.binaryPath) gitssh -- \(options)" : "ssh \(options)"
                return await workspace.git(
                    ["clone", "-q", url, viaGitSSH ? "dest" : "plain"],
                    environment: ["GIT_SSH_COMMAND": command, "CODER_AGENT_URL": base, "CODER_AGENT_TOKEN": double.token])
            }
            try await body(workspace, clone, double, servedPublic)
        }
    }

    @Test func aCloneOverSSHUsesTheOwnersCoderKey() async throws {
        try await Self.withClone(servedKeyIsAuthorized: true) { workspace, clone, double, _ in
            // Plain ssh has no key sshd accepts: the server's check is real.
            let refused = await clone(false)
            #expect(refused.status != 0)
            #expect(workspace.clonedContent("plain") == nil)

            let cloned = await clone(true)
            #expect(cloned.status == 0, "\(cloned.stdout)")
            #expect(workspace.clonedContent("dest") == GitWorkspace.content)
            #expect(double.httpRequests.contains { $0.path == Self.keyPath && $0.header("Coder-Session-Token") == double.token })
            #expect(workspace.leftoverKeys().isEmpty, "the temporary private key is removed")
        }
    }

    /// No `ssh` on PATH: Go's `exec.ErrNotFound` words, as the reference prints them (not an
    /// errno the failed lookup never set), and the key file is removed all the same.
    @Test func withoutSSHOnThePathTheErrorIsTheReferences() async throws {
        let link = try CoderLink()
        defer { link.remove() }
        let empty = link.directory + "/empty-path"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let double = ControlPlaneDouble()
        double.externalAuth.withLock { $0.gitSSHKey = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE coder", "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n") }
        let outcome = Mutex<ChildProgram.Outcome?>(nil)
        try await double.run { base in
            // The later PATH wins over CoderLink's own (env sets them in order).
            let result = await link.run(
                ["gitssh", "--", "git@example.com", "git-upload-pack 'repo.git'"],
                environment: ["PATH": empty, "CODER_AGENT_URL": base, "CODER_AGENT_TOKEN": double.token])
            outcome.withLock { $0 = result }
        }
        let result = try #require(outcome.withLock { $0 })
        #expect(result.status == 1)
        #expect(result.stdout.hasSuffix("error: run ssh command: exec: \"ssh\": executable file not found in $PATH\n"), "\(result.stdout)")
        let left = try FileManager.default.contentsOfDirectory(atPath: link.directory).filter { $0.hasPrefix("coder-gitsshkey-") }
        #expect(left.isEmpty, "the temporary private key is removed: \(left)")
    }

    @Test func aKeyTheServerRefusesShowsWhichPublicKeyToRegister() async throws {
        try await Self.withClone(servedKeyIsAuthorized: false) { workspace, clone, _, servedPublic in
            let cloned = await clone(true)
            #expect(cloned.status != 0)
            #expect(cloned.stdout.contains("Coder authenticates with git using the public key below."))
            #expect(cloned.stdout.contains(servedPublic.trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(cloned.stdout.contains("https://github.com/settings/ssh/new"))
            #expect(workspace.leftoverKeys().isEmpty)
        }
    }
}
