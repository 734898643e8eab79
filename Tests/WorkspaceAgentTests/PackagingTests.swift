import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `make install`'s files beside the binary (`make install-files`, the part that needs no
/// release build): the systemd unit, its environment file and the documentation the unit
/// names land under DESTDIR, at the paths the installed unit names, and the unit leaves the
/// umask of the user's commands alone and waits longer than the documented stop bound.
@Suite(.timeLimit(.minutes(2)))
struct PackagingTests {
    static let root = DocExamples.repositoryRoot.path

    /// `make install-files` into a fresh DESTDIR with `variables`; the DESTDIR.
    static func install(_ variables: [String] = []) async throws -> String {
        let destdir = NSTemporaryDirectory() + "install-\(UUID().uuidString.prefix(8))"
        let make = await ChildProgram.run(
            ["make", "--no-print-directory", "-C", root, "install-files", "DESTDIR=\(destdir)"] + variables, stderrToStdout: true)
        try #require(make.status == 0, "make install-files failed:\n\(make.stdout)")
        return destdir
    }

    /// packaging/check-install.sh on the installed files (no binary).
    static func check(_ destdir: String, unit: String) async -> ChildProgram.Outcome {
        await ChildProgram.run(
            ["/bin/bash", root + "/packaging/check-install.sh", "--destdir", destdir, unit, "--files-only"], stderrToStdout: true)
    }

    @Test func theUnitItsEnvironmentFileAndItsDocsAreInstalled() async throws {
        let destdir = try await Self.install()
        defer { try? FileManager.default.removeItem(atPath: destdir) }
        let unitPath = "/usr/local/lib/systemd/system/workspace-agent.service"
        let checked = await Self.check(destdir, unit: unitPath)
        #expect(checked.status == 0, "\(checked.stdout)")

        let unit = try String(contentsOfFile: destdir + unitPath, encoding: .utf8)
        let lines = unit.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(!lines.contains { $0.hasPrefix("UMask=") }, "the unit sets a umask its children inherit")
        #expect(lines.contains("StateDirectoryMode=0700"))
        // The documented bound with stop scripts at the default limit: 7 s + 300 s + 12 s.
        let timeout = lines.first { $0.hasPrefix("TimeoutStopSec=") }.map { $0.dropFirst("TimeoutStopSec=".count) } ?? ""
        let seconds = Int(timeout.hasSuffix("s") ? timeout.dropLast() : timeout) ?? 0
        #expect(seconds > 319, "TimeoutStopSec=\(timeout)")

        #expect(FileManager.default.fileExists(atPath: destdir + "/usr/local/share/doc/workspace-agent/README.md"))
        #expect(FileManager.default.fileExists(atPath: destdir + "/usr/local/share/doc/workspace-agent/docs/api/signals-and-shutdown.md"))
        let mode = try? FileManager.default.attributesOfItem(atPath: destdir + "/etc/workspace-agent.env")[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    /// Another PREFIX and SYSCONFDIR: the installed unit names the paths it was installed to,
    /// and an environment file already there (the administrator's settings) is kept.
    @Test func theInstalledUnitNamesWhereThingsWent() async throws {
        let destdir = NSTemporaryDirectory() + "install-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: destdir) }
        try FileManager.default.createDirectory(atPath: destdir + "/opt/etc", withIntermediateDirectories: true)
        let settings = destdir + "/opt/etc/workspace-agent.env"
        try TestFile.write(settings, "CODER_AGENT_URL=https://mine.example\n".utf8)
        chmod(settings, 0o600)
        let make = await ChildProgram.run(
            ["make", "--no-print-directory", "-C", Self.root, "install-files", "DESTDIR=\(destdir)", "PREFIX=/opt/wa", "SYSCONFDIR=/opt/etc"],
            stderrToStdout: true)
        try #require(make.status == 0, "make install-files failed:\n\(make.stdout)")
        let unitPath = "/opt/wa/lib/systemd/system/workspace-agent.service"
        let unit = try String(contentsOfFile: destdir + unitPath, encoding: .utf8)
        #expect(unit.contains("ExecStart=/opt/wa/bin/workspace-agent run"))
        #expect(unit.contains("EnvironmentFile=-/opt/etc/workspace-agent.env"))
        #expect(unit.contains("Documentation=file:///opt/wa/share/doc/workspace-agent/README.md"))
        #expect(!unit.contains("/usr/local"))
        #expect(try String(contentsOfFile: settings, encoding: .utf8) == "CODER_AGENT_URL=https://mine.example\n")
        let checked = await Self.check(destdir, unit: unitPath)
        #expect(checked.status == 0, "\(checked.stdout)")
    }
}
