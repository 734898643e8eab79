@testable import AgentProc
import AgentCore
import AgentTestSupport
import Foundation
import Testing

/// The spawner's own bookkeeping: the pidfd that comes with the child, and the cached
/// `sh` that is used without a check and looked up again once it has gone.
struct ProcessSpawnerTests {
    private func run(_ command: String, path: String) throws -> Int32 {
        let child = try ProcessSpawner.spawn(
            SpawnRequest(command: command, workdir: nil, environment: EnvironmentBlock(["PATH": path]), priority: .unchanged, childNofileSoft: nil),
            agentPath: path)
        defer {
            close(child.pidfd)
            close(child.outputFD)
        }
        #expect(child.pidfd >= 0)
        var status: Int32 = 0
        while waitpid(child.pid, &status, 0) < 0 && errno == EINTR {}
        return (status >> 8) & 0xFF
    }

    @Test func aCachedShellThatHasGoneIsLookedUpAgain() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("spawner-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createSymbolicLink(atPath: dir + "/sh", withDestinationPath: "/bin/sh")
        let path = dir + ":/usr/bin:/bin"
        #expect(try run("exit 7", path: path) == 7)
        // The cached `sh` is removed: the next start finds the one further along PATH.
        try FileManager.default.removeItem(atPath: dir + "/sh")
        #expect(try run("exit 8", path: path) == 8)
        #expect(try run("exit 9", path: path) == 9)
    }

    /// Like Go's exec.LookPath: a first match relative to the current directory is refused
    /// (the child would run whatever `sh` its working directory holds).
    @Test func aShellFoundRelativeToTheCurrentDirectoryIsRefused() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("spawner-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createSymbolicLink(atPath: dir + "/sh", withDestinationPath: "/bin/sh")
        // The same directory, written relative to this process's working directory.
        let depth = FileManager.default.currentDirectoryPath.split(separator: "/").count
        let relative = String(repeating: "../", count: depth) + dir.dropFirst()
        do {
            _ = try run("true", path: relative + ":/bin")
            Issue.record("a relative sh was run")
        } catch {
            #expect("\(error)".contains("relative to current directory"), "\(error)")
        }
    }

    /// A shell's exit is read without reaping it; one someone else reaped (ECHILD) reports
    /// -1 without a signal, as the reference reports a wait error that is not an ExitError
    /// (it was 255).
    @Test func anExitReapedElsewhereIsMinusOneWithoutASignal() async throws {
        let path = "/usr/bin:/bin"
        let child = try ProcessSpawner.spawn(
            SpawnRequest(command: "exit 3", workdir: nil, environment: EnvironmentBlock(["PATH": path]), priority: .unchanged, childNofileSoft: nil),
            agentPath: path)
        defer {
            close(child.pidfd)
            close(child.outputFD)
        }
        #expect(await eventually { ProcessWatcher.peekExit(child.pid) != nil })
        let own = try #require(ProcessWatcher.peekExit(child.pid))
        #expect(own.status == ExitStatus(code: 3, signal: nil))
        #expect(!own.reapedElsewhere)
        // Reaped here, as someone else would: its status is gone.
        #expect(OwnedChildren.reap(child.pid, wait: true) != nil)
        let gone = try #require(ProcessWatcher.peekExit(child.pid))
        #expect(gone.status == ExitStatus(code: -1, signal: nil))
        #expect(gone.reapedElsewhere)
    }

    @Test func noShellAnywhereIsAClearError() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("spawner-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(throws: SpawnError.self) { try self.run("true", path: dir) }
    }
}
