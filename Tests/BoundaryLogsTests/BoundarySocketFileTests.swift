import AgentCore
import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import BoundaryLogs

/// The boundary socket goes through AgentCore's `SocketFile`, as the agent
/// socket does: it never exists at its path with the umask's mode (it used to be bound
/// there, then chmod-ed), and it is removed at shutdown only if it is still ours.
@Suite(.timeLimit(.minutes(3)))
struct BoundarySocketFileTests {
    static func directory() throws -> String {
        let directory = NSTemporaryDirectory() + "boundary-file-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test func theSocketIsRenamedIntoPlaceWithItsModeNeverCreatedThere() async throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let events = try #require(DirectoryEvents(directory))
        try await BoundaryHarness.with(directory: directory, configure: { $0.mode = 0o640 }) { harness in
            var info = stat()
            #expect(lstat(harness.path, &info) == 0 && info.st_mode & 0o777 == 0o640)
            let seen = events.drain().filter { $0.name == "audit.sock" }
            #expect(!seen.contains { $0.isCreate }, "never bound at the final path: \(seen)")
            #expect(seen.contains { $0.isMovedIn }, "renamed into place: \(seen)")
            let socket = try harness.connect()
            socket.send(Boundary.v1(Boundary.request(["https://renamed.invalid/"])))
            #expect(await eventually { harness.upward.urls == ["https://renamed.invalid/"] })
        }
    }

    @Test func aSocketSomeoneElsePutThereIsNotRemovedAtShutdown() async throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/audit.sock"
        var other: Int32 = -1
        try await BoundaryHarness.with(directory: directory) { harness in
            // Another process replaces the socket while the agent runs.
            unlink(harness.path)
            other = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            #expect(UnixSocket.withAddress(path) { bind(other, $0, $1) } == 0 && listen(other, 4) == 0)
        }
        defer { close(other) }
        #expect(SocketFile.isLive(path), "the other socket is still there after the agent's shutdown")
    }

    @Test func aRegularFileAtThePathIsLeftAlone() async throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/audit.sock"
        _ = FileManager.default.createFile(atPath: path, contents: Data("not a socket".utf8))
        let server = BoundarySocketServer(
            configuration: .init(path: path), forwarder: BoundaryForwarder(upward: RecordingUpward(), spool: nil))
        try await server.run()
        #expect(!server.isListening)
        #expect(FileManager.default.contents(atPath: path) == Data("not a socket".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["audit.sock"], "no staging left behind")
    }
}
