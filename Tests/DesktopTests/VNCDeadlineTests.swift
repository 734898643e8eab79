import AgentTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import Desktop

/// The agent's own VNC connection never waits on the desktop without a bound (1 s here):
/// a server that stops answering, or stops reading, fails the action under way with 500
/// and its failure text, and the next action is answered too. Before, the handshake or a
/// send waited forever while its action held the desktop's queue, so every later action
/// waited behind it (and a send held the connection's lock, which `close` waited for).
@Suite(.serialized, .timeLimit(.minutes(2)))
struct VNCDeadlineTests {
    /// A portabledesktop stub whose desktop is the VNC server on `port`, and its directory.
    static func desktop(port: Int) throws -> (directory: String, environment: [String: String]) {
        try PortableDesktopTests.stubDirectory(extra: ["STUB_PRINT": #"{"vncPort":\#(port),"geometry":"1920x1080"}"#])
    }

    static var shortBound: DesktopOptions.Configuration {
        var configuration = DesktopOptions.Configuration()
        configuration.vncTimeout = .seconds(1)
        return configuration
    }

    /// A server that takes the connection and never says a word (a stopped Xvnc): the
    /// handshake fails within the bound, each time.
    @Test func aSilentServerFailsTheActionInTime() async throws {
        let server = try LoopbackRFBServer(handshakes: 0)
        defer { server.close() }
        let (directory, environment) = try Self.desktop(port: server.port)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await DesktopHarness.with(environment: environment, configuration: Self.shortBound) { desktop in
            for attempt in 0..<2 {
                let began = ContinuousClock.now
                let click = try await desktop.action(#"{"action":"left_click","coordinate":[10,20]}"#)
                #expect(click.status == 500 && click.body["message"] as? String == "Left click failed.", "\(attempt): \(click.status) \(click.body)")
                #expect((click.body["detail"] as? String)?.contains("did not answer within") == true, "\(attempt): \(click.body)")
                #expect(ContinuousClock.now - began < .seconds(30), "\(attempt): answered within the bound, not at the client's timeout")
            }
        }
    }

    /// A server that completes the handshake and then reads nothing: a `type` whose events
    /// fill the socket's buffers fails within the bound (before, its send blocked for good,
    /// holding the connection's lock), and the next action is answered.
    @Test func aServerThatStopsReadingFailsTheSendInTime() async throws {
        let server = try LoopbackRFBServer(handshakes: 1)
        defer { server.close() }
        let (directory, environment) = try Self.desktop(port: server.port)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await DesktopHarness.with(environment: environment, configuration: Self.shortBound) { desktop in
            // The handshake works, and a click's few bytes fit in the buffers.
            let click = try await desktop.action(#"{"action":"left_click","coordinate":[10,20]}"#)
            #expect(click.status == 200, "\(click.status) \(click.body)")
            // 1 000 000 characters: 16 MB of key events, past any socket buffer.
            let began = ContinuousClock.now
            let typed = try await desktop.action(#"{"action":"type","text":"\#(String(repeating: "a", count: 1_000_000))"}"#)
            #expect(typed.status == 500 && typed.body["message"] as? String == "Type action failed.", "\(typed.status) \(typed.body)")
            #expect((typed.body["detail"] as? String)?.contains("did not answer within") == true, "\(typed.body)")
            #expect(ContinuousClock.now - began < .seconds(40))
            // The connection is made again: the server takes no second handshake, which
            // fails within the bound too.
            let again = try await desktop.action(#"{"action":"left_click","coordinate":[10,20]}"#)
            #expect(again.status == 500 && again.body["message"] as? String == "Left click failed.", "\(again.status) \(again.body)")
        }
    }
}

/// An RFB server on a loopback port that answers the handshake (RFB 3.8, no
/// authentication, a 64×36 screen) of its first `handshakes` connections and then neither
/// reads nor writes on them; later connections wait in its backlog, never accepted (the
/// kernel completes them: a client's connect succeeds, and nothing comes). Its receive
/// buffer is small, so what a client sends fills the buffers soon.
final class LoopbackRFBServer: Sendable {
    let port: Int
    private let listener: Int32
    private let accepted = Mutex<[Int32]>([])

    init(handshakes: Int) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        var small: Int32 = 4096
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                guard bind(fd, pointer, length) == 0, listen(fd, 16) == 0 else { return false }
                return getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else {
            Glibc.close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        if handshakes > 0 {
            let thread = Thread { [self] in serve(handshakes) }
            thread.start()
        }
    }

    /// Accepts `count` connections, answering each one's handshake, then stops accepting.
    private func serve(_ count: Int) {
        for _ in 0..<count {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { return }
            accepted.withLock { $0.append(fd) }
            func send(_ bytes: [UInt8]) {
                _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            func receive(_ count: Int) -> Bool {
                var buffer = [UInt8](repeating: 0, count: count)
                return recv(fd, &buffer, count, Int32(MSG_WAITALL)) == count
            }
            send(Array("RFB 003.008\n".utf8))
            guard receive(12) else { continue }
            send([1, 1])  // one security type: None
            guard receive(1) else { continue }
            send([0, 0, 0, 0])  // SecurityResult: OK
            guard receive(1) else { continue }  // ClientInit
            // ServerInit: 64×36; 32 bits a pixel, depth 24, little-endian true colour, each
            // channel 0-255 at shifts 16, 8, 0, three bytes of padding; the name "deaf".
            let format: [UInt8] = [32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0]
            send([0, 64, 0, 36] + format + [0, 0, 0, 4] + Array("deaf".utf8))
            // Then nothing, until `close`.
        }
    }

    /// Ends every connection and the listener (a thread waiting in `accept` returns).
    func close() {
        for fd in accepted.withLock({ $0 }) {
            shutdown(fd, Int32(SHUT_RDWR))
            Glibc.close(fd)
        }
        shutdown(listener, Int32(SHUT_RDWR))
        Glibc.close(listener)
    }
}
