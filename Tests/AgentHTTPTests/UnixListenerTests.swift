import AgentCore
import AgentHTTP
import AgentTestSupport
import Foundation
import Hummingbird
import Logging
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// An HTTP listener at `unix:/path` is made by AgentCore's `SocketFile`, like
/// the agent and boundary sockets: never at its path with another mode, a stale socket
/// replaced, and removed when it closes only if it is still ours.
@Suite(.timeLimit(.minutes(3)))
struct UnixListenerTests {
    static func directory() throws -> String {
        let directory = NSTemporaryDirectory() + "http-unix-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    /// A listening socket at `path`, close-on-exec (a child another test spawns must not keep it).
    static func listen(_ path: String) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        _ = UnixSocket.withAddress(path) { bind(fd, $0, $1) }
        _ = Glibc.listen(fd, 4)
        return fd
    }

    /// Runs the server at `unix:<path>` until `body` returns, then stops it.
    static func withUnixServer(_ path: String, _ body: () async throws -> Void) async throws {
        let (started, sink) = AsyncStream<Void>.makeStream()
        let app = AgentHTTPServer.makeApplication(
            address: BindTarget(kind: .unix(path: path)), mounts: [],
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        ) { _ in
            sink.yield()
            sink.finish()
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.run() }
            var iterator = started.makeAsyncIterator()
            _ = await iterator.next()
            do {
                try await body()
            } catch {
                group.cancelAll()
                throw error
            }
            group.cancelAll()
        }
    }

    @Test func aStaleSocketIsReplacedAndTheListenerIsPrivateThenRemoved() async throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/http.sock"
        makeStaleSocket(path)
        let events = try #require(DirectoryEvents(directory))
        _ = events.drain()
        try await Self.withUnixServer(path) {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect(attributes[.type] as? FileAttributeType == .typeSocket && (attributes[.posixPermissions] as? Int) == 0o600)
            let seen = events.drain().filter { $0.name == "http.sock" }
            #expect(!seen.contains { $0.isCreate } && seen.contains { $0.isMovedIn }, "renamed into place: \(seen)")
            let client = try #require(LoopbackSocket(unixPath: path))
            client.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(String.httpStatus(of: await client.read(until: "\"ok\"}")) == 200)
        }
        #expect(await eventually { !FileManager.default.fileExists(atPath: path) }, "removed once the listener closed")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty, "no staging left behind")
    }

    @Test func aSocketSomeoneElsePutThereIsNotRemoved() async throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/http.sock"
        var other: Int32 = -1
        try await Self.withUnixServer(path) {
            unlink(path)
            other = Self.listen(path)
        }
        defer { close(other) }
        try await Task.sleep(for: .milliseconds(200))
        #expect(SocketFile.isLive(path), "the other listener's socket stays")
    }
}
