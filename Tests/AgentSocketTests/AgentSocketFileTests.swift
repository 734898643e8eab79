import AgentCore
import AgentSocket
import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The agent socket goes through AgentCore's `SocketFile`: renamed into place
/// with its mode, never created at its path; a socket someone else put there stays.
@Suite(.timeLimit(.minutes(3)))
struct AgentSocketFileTests {
    @Test func theSocketIsRenamedIntoPlaceAndSomeoneElsesIsLeftAtShutdown() async throws {
        let directory = try socketDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/agent.sock"
        let events = try #require(DirectoryEvents(directory))
        var other: Int32 = -1
        try await withSocketServer(path: path) { client, server in
            #expect(server.isListening)
            var info = stat()
            #expect(lstat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
            let seen = events.drain().filter { $0.name == "agent.sock" }
            #expect(!seen.contains { $0.isCreate } && seen.contains { $0.isMovedIn }, "\(seen)")
            try await client.ping()
            // Someone else replaces it while the agent runs.
            unlink(path)
            other = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            #expect(UnixSocket.withAddress(path) { bind(other, $0, $1) } == 0 && listen(other, 4) == 0)
        }
        defer { close(other) }
        #expect(SocketFile.isLive(path), "the other socket stays after the agent's shutdown")
    }
}
