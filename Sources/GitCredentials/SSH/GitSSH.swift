import AgentCore
import AgentJSON
import AgentSystem
#if canImport(Glibc)
import Glibc
#endif

/// `GIT_SSH_COMMAND="<agent> gitssh --"`: `ssh` with the user's own identity files first and
/// the workspace owner's Coder git key (fetched from coderd, written to a private temporary
/// file removed afterwards) last.
public enum GitSSH {
    public static let keyPath = "/api/v2/workspaceagents/me/gitsshkey"
    /// `ssh -G` is given this long (it only reads the configuration).
    static let configTimeout: Duration = .seconds(10)

    /// The owner's key pair, as coderd sends it.
    public struct Key: Sendable, Equatable {
        public var publicKey: String
        public var privateKey: String
    }

    /// `GET …/gitsshkey`; any failure as the reference words it.
    public static func fetchKey(api: any CoderRESTRequesting) async throws(GitCredentialsFailure) -> Key {
        let response: CoderRESTResponse
        do { response = try await api.get(keyPath) } catch { throw .message("get agent git ssh token: \(error.description)") }
        guard response.status == 200 else { throw .message("get agent git ssh token: " + response.unexpectedStatusText) }
        guard let value = try? JSONValue.parseFirst(response.body), case .object = value else {
            throw .message("get agent git ssh token: decode: not a JSON object")
        }
        return Key(publicKey: value.goField("public_key")?.stringValue ?? "", privateKey: value.goField("private_key")?.stringValue ?? "")
    }

    /// The identity files `ssh -G <arguments>` names that exist (OpenSSH's defaults when it fails).
    public static func identityFiles(arguments: [String], home: String) -> [String] {
        var output = SSHIdentityFiles.fallbackOutput
        if let result = LocalCommand.capture(["ssh", "-G"] + arguments, maxBytes: SSHIdentityFiles.maxOutputBytes, timeout: configTimeout),
            result.status == 0
        {
            output = String(decoding: result.output, as: UTF8.self)
        }
        return SSHIdentityFiles.parse(output, home: home) { access($0, F_OK) == 0 }
    }

    /// The whole command: returns the exit status on success; a failure is thrown after the
    /// reference's notice (exit status 255: which public key to register where) went to `stderr`.
    public static func run(arguments: [String], api: any CoderRESTRequesting, home: String, stderr: (String) -> Void) async throws(GitCredentialsFailure) {
        let identities = identityFiles(arguments: arguments, home: home)
        let key = try await fetchKey(api: api)
        let keyFile = try writeTemporaryKey(key.privateKey)
        defer { unlink(keyFile) }
        var argv = ["ssh"]
        for file in identities + [keyFile] { argv += ["-i", file] }
        argv += arguments
        let status: Int32
        do throws(LocalCommand.StartFailure) {
            status = try LocalCommand.runForwardingSignals(argv)
        } catch {
            throw .message("run ssh command: \(error.description)")
        }
        if status & 0x7f == 0, (status >> 8) & 0xff == 0 { return }
        if status & 0x7f == 0, (status >> 8) & 0xff == 255 {
            stderr(notice(publicKey: key.publicKey))
            throw .message("exit status 255")
        }
        throw .message("run ssh command: " + describe(status))
    }

    /// The reference's explanation when ssh could not authenticate.
    static func notice(publicKey: String) -> String {
        "\nCoder authenticates with git using the public key below. All clones with SSH are authenticated automatically 🪄.\n\n"
            + publicKey.trimmingWhitespace() + "\n\n"
            + "Add to GitHub and GitLab:\n"
            + "https://github.com/settings/ssh/new\n\n"
            + "https://gitlab.com/-/profile/keys\n\n\n"
    }

    /// Go's `ExitError` text.
    static func describe(_ status: Int32) -> String {
        if status & 0x7f == 0 { return "exit status \((status >> 8) & 0xff)" }
        let signal = status & 0x7f
        return "signal: " + String(cString: strsignal(signal))
    }

    /// `$TMPDIR/coder-gitsshkey-XXXXXX`, mode 0600, holding the private key.
    static func writeTemporaryKey(_ privateKey: String) throws(GitCredentialsFailure) -> String {
        var directory = getenv("TMPDIR").map { String(cString: $0) } ?? ""
        if directory.isEmpty { directory = "/tmp" }
        var template = Array((directory + "/coder-gitsshkey-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw .message("create temp gitsshkey file: \(String(cString: strerror(errno)))") }
        let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer { close(fd) }
        let bytes = Array(privateKey.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                unlink(path)
                throw .message("write to temp gitsshkey file: \(String(cString: strerror(errno)))")
            }
            offset += n
        }
        return path
    }
}
