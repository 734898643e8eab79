import AgentCore
import AgentProto
import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Logging
import Testing

/// The user's secrets (manifest field 19): their variables, how a path resolves, and the
/// files as written, including what a control plane that validated nothing could send.
@Suite(.timeLimit(.minutes(2)))
struct ManifestSecretsTests {
    static func secret(env: String = "", file: String = "", _ value: [UInt8]) -> Coder_Agent_V2_WorkspaceSecret {
        ControlPlaneDouble.secret(env: env, file: file, value)
    }

    static func secret(env: String = "", file: String = "", _ value: String) -> Coder_Agent_V2_WorkspaceSecret {
        secret(env: env, file: file, Array(value.utf8))
    }

    /// A fresh home directory, and a logger whose lines a test reads.
    static func home() throws -> String {
        let path = NSTemporaryDirectory() + "secrets-home-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func mode(_ path: String) -> mode_t {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & 0o7777 : 0
    }

    @Test func variablesAreRawAndTheUnrepresentableRefused() {
        let big = [UInt8](repeating: UInt8(ascii: "a"), count: 1 << 20)
        let (variables, refused) = ManifestSecrets.variables([
            Self.secret(env: "PASSWORD", "p$HOME${X}"),
            Self.secret(file: "~/only-a-file", "f"),
            Self.secret(env: "TWICE", "first"),
            Self.secret(env: "TWICE", "second"),
            Self.secret(env: "A=B", "x"),
            Self.secret(env: "NUL", [UInt8(ascii: "a"), 0, UInt8(ascii: "b")]),
            Self.secret(env: "LATIN1", [0x63, 0x61, 0x66, 0xE9]),
            Self.secret(env: "HUGE", big),
        ])
        #expect(variables == ["PASSWORD": "p$HOME${X}", "TWICE": "second"])
        #expect(refused.map(\.name) == ["A=B", "NUL", "LATIN1", "HUGE"])
        #expect(!refused.map(\.reason).joined().contains("aaaa"), "never the value")
        // Together at most 256 KiB: the variable that would pass it is refused, earlier ones kept.
        let chunk = String(repeating: "v", count: 100 << 10)
        let many = ManifestSecrets.variables((0..<3).map { Self.secret(env: "V\($0)", chunk) })
        #expect(many.variables.keys.sorted() == ["V0", "V1"] && many.refused.map(\.name) == ["V2"])
    }

    @Test func pathsResolveByTheReferencesRulesAndRefuseTheRest() {
        #expect(ManifestSecrets.resolve("", home: "/home/u") == .none)
        #expect(ManifestSecrets.resolve("~/.aws//credentials", home: "/home/u") == .path("/home/u/.aws/credentials", home: "/home/u"))
        #expect(ManifestSecrets.resolve("/etc/./app/key", home: "/home/u") == .path("/etc/app/key", home: nil))
        #expect(ManifestSecrets.resolve("~/x", home: nil) == .refused("home directory unknown"))
        #expect(ManifestSecrets.resolve("~/../../etc/passwd", home: "/home/u") == .refused("the path has a \"..\" component"))
        #expect(ManifestSecrets.resolve("/tmp/a/../b", home: "/home/u") == .refused("the path has a \"..\" component"))
        #expect(ManifestSecrets.resolve("relative/key", home: "/home/u") == .refused("the path is neither absolute nor in the home directory (~/)"))
        #expect(ManifestSecrets.resolve("~other/key", home: "/home/u") == .refused("the path is neither absolute nor in the home directory (~/)"))
        #expect(ManifestSecrets.resolve("/tmp/a\0b", home: "/home/u") == .refused("the path contains a NUL byte"))
        #expect(ManifestSecrets.resolve("/" + String(repeating: "a", count: 4096), home: "/home/u") == .refused("the path is longer than 4096 bytes"))
    }

    /// Created 0600 in 0700 directories; an existing file keeps its mode and is truncated;
    /// two secrets on one path: the later wins, with a warning; a failure is logged and the
    /// next secret still written; a 1 MiB value whole.
    @Test func filesAreWrittenWithTheReferencesModes() throws {
        let home = try Self.home()
        defer { try? FileManager.default.removeItem(atPath: home) }
        try TestFile.write(home + "/existing", "a much longer old content")
        chmod(home + "/existing", 0o644)
        let big = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let log = CapturedLog()
        let written = ManifestSecrets.writeFiles(
            [
                Self.secret(file: "~/.config/app/token", "s3cr3t"),
                Self.secret(file: "~/existing", "new"),
                Self.secret(file: "~/existing/below", "x"),
                Self.secret(file: home + "/dup", "first"),
                Self.secret(file: "~/dup", "second"),
                Self.secret(file: "~/big", big),
            ], home: home, logger: log.logger)
        #expect(written == [home + "/.config/app/token", home + "/existing", home + "/dup", home + "/dup", home + "/big"])
        #expect(try String(contentsOfFile: home + "/.config/app/token", encoding: .utf8) == "s3cr3t")
        #expect(Self.mode(home + "/.config/app/token") == 0o600)
        #expect(Self.mode(home + "/.config") == 0o700 && Self.mode(home + "/.config/app") == 0o700)
        #expect(try String(contentsOfFile: home + "/existing", encoding: .utf8) == "new")
        #expect(Self.mode(home + "/existing") == 0o644, "an existing file keeps its mode")
        #expect(try String(contentsOfFile: home + "/dup", encoding: .utf8) == "second")
        #expect(try Data(contentsOf: URL(fileURLWithPath: home + "/big")) == Data(big))
        #expect(log.contains("multiple secrets resolve to the same file path"))
        #expect(log.contains("failed to write secret file"))
        #expect(!log.text.contains("s3cr3t") && !log.text.contains("second"), "values never logged")
    }

    /// A symbolic link at the path is not followed, nor is a FIFO or a device written; a
    /// `~/` path whose directory is a link out of the home directory is refused; a link to a
    /// directory inside the home directory is followed.
    @Test func linksAndSpecialFilesAreNotWrittenThrough() throws {
        let home = try Self.home()
        let outside = try Self.home()
        defer {
            try? FileManager.default.removeItem(atPath: home)
            try? FileManager.default.removeItem(atPath: outside)
        }
        try TestFile.write(outside + "/target", "untouched")
        try FileManager.default.createSymbolicLink(atPath: home + "/link", withDestinationPath: outside + "/target")
        try FileManager.default.createSymbolicLink(atPath: home + "/away", withDestinationPath: outside)
        try FileManager.default.createDirectory(atPath: home + "/dotfiles/aws", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: home + "/.aws", withDestinationPath: home + "/dotfiles/aws")
        #expect(mkfifo(home + "/fifo", 0o600) == 0)
        let log = CapturedLog()
        let written = ManifestSecrets.writeFiles(
            [
                Self.secret(file: "~/link", "via-link"),
                Self.secret(file: "~/away/new-dir/key", "escaped"),
                Self.secret(file: "~/fifo", "into-fifo"),
                Self.secret(file: "/dev/null", "device"),
                Self.secret(file: "~/.aws/credentials", "kept-inside"),
            ], home: home, logger: log.logger)
        #expect(written == [home + "/.aws/credentials"], "\(log.text)")
        #expect(try String(contentsOfFile: outside + "/target", encoding: .utf8) == "untouched")
        #expect(!FileManager.default.fileExists(atPath: outside + "/new-dir"), "nothing created outside the home directory")
        #expect(try String(contentsOfFile: home + "/dotfiles/aws/credentials", encoding: .utf8) == "kept-inside")
        #expect(log.contains("is a symbolic link (not followed)"))
        #expect(log.contains("outside the home directory"))
        #expect(log.contains("is not a regular file"))
    }
}
