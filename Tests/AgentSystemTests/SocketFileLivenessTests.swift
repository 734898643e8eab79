import AgentSystem
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// ``SocketFile/isLive(_:)``: a listener is live even with its backlog full (it is there,
/// just not accepting), a socket file nobody listens on is not, nor is a missing path. The
/// probe does not block (it had waited a second on a full backlog, on an event loop).
struct SocketFileLivenessTests {
    static func listener(_ path: String, listening: Bool) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        _ = UnixSocket.withAddress(path) { bind(fd, $0, $1) }
        if listening { listen(fd, 0) }
        return fd
    }

    @Test func aFullBacklogIsLiveAndAStaleSocketIsNot() throws {
        let directory = NSTemporaryDirectory() + "socket-live-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let full = directory + "/full"
        let server = Self.listener(full, listening: true)
        defer { close(server) }
        // Fill the backlog: connections nobody accepts (non-blocking, a bounded number).
        var clients: [Int32] = []
        defer { for client in clients { close(client) } }
        for _ in 0..<8 {
            let client = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            clients.append(client)
            let result = UnixSocket.withAddress(full) { connect(client, $0, $1) }
            if result != 0 && errno == EAGAIN { break }
        }
        #expect(SocketFile.isLive(full))
        let stale = directory + "/stale"
        let bound = Self.listener(stale, listening: false)
        defer { close(bound) }
        #expect(!SocketFile.isLive(stale))
        #expect(!SocketFile.isLive(directory + "/missing"))
    }
}
