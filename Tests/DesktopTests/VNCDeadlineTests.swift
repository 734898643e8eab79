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
            // Within the bound, not at the client's timeout: the detail is the bound's own (the
            // suite's limit catches a wait that never ends).
            for attempt in 0..<2 {
                let click = try await desktop.action(#"{"action":"left_click","coordinate":[10,20]}"#)
                #expect(click.status == 500 && click.body["message"] as? String == "Left click failed.", "\(attempt): \(click.status) \(click.body)")
                #expect((click.body["detail"] as? String)?.contains("did not answer within") == true, "\(attempt): \(click.body)")
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
            let typed = try await desktop.action(#"{"action":"type","text":"\#(String(repeating: "a", count: 1_000_000))"}"#)
            #expect(typed.status == 500 && typed.body["message"] as? String == "Type action failed.", "\(typed.status) \(typed.body)")
            #expect((typed.body["detail"] as? String)?.contains("did not answer within") == true, "\(typed.body)")
            // The connection is made again: the server takes no second handshake, which
            // fails within the bound too.
            let again = try await desktop.action(#"{"action":"left_click","coordinate":[10,20]}"#)
            #expect(again.status == 500 && again.body["message"] as? String == "Left click failed.", "\(again.status) \(again.body)")
        }
    }

    /// The bound is on silence, not on a message's length: a 256 KiB update that arrives in
    /// 40 pieces, one every 100 ms, takes 4 s whole, twice the client's 2 s bound, and is
    /// received (the client stays usable). Before, the read was cut off 2 s after it began
    /// and the connection dropped.
    @Test func anUpdateThatKeepsArrivingPastTheBoundIsReceivedWhole() async throws {
        let server = try PacedRFBServer(pace: .steady(pieces: 40, intervalMs: 100))
        defer { server.close() }
        // A low floor (16 KiB/s: 2 s + 16 s in all for this update): only the silence bound
        // is under test here, however slowly a loaded machine runs the server.
        let client = try await VNCClient.connect(port: server.port, timeout: .seconds(2), minimumRate: 16 * 1024)
        #expect(await eventually { client.updatesReceived > 0 || !client.isUsable })
        #expect(client.updatesReceived == 1 && client.isUsable && !client.timedOut)
        let span = server.sendingSpan
        #expect(span.map { $0 > .seconds(2) } == true, "the update took longer than the bound to arrive: \(String(describing: span))")
        await client.close()
    }

    /// A server that never goes quiet for the bound but sends one byte of an update every
    /// 100 ms (10 bytes a second, far below the 64 KiB/s floor) is cut off about the bound
    /// after the read began, while it still trickles: bytes that keep coming do not keep a
    /// call (and the lock actions wait on) for as long as the server likes.
    @Test func aServerTricklingBelowTheFloorIsCutOff() async throws {
        let server = try PacedRFBServer(pace: .trickle(intervalMs: 100))
        defer { server.close() }
        let client = try await VNCClient.connect(port: server.port, timeout: .seconds(1))
        #expect(await eventually { !client.isUsable })
        #expect(client.timedOut && client.updatesReceived == 0)
        // Cut off by the client while the server went on (its trickle lasts a minute).
        #expect(!server.finishedSending)
        await client.close()
    }
}

/// A TCP socket listening on 127.0.0.1 at an ephemeral port (close-on-exec), with `backlog`
/// and, when given, a receive buffer of `receiveBuffer` bytes; and that port.
func loopbackListener(backlog: Int32, receiveBuffer: Int32? = nil) throws -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.EMFILE) }
    if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
            guard bind(fd, pointer, length) == 0, listen(fd, backlog) == 0 else { return false }
            return getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else {
        Glibc.close(fd)
        throw POSIXError(.EADDRINUSE)
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
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
        (listener, port) = try loopbackListener(backlog: 16, receiveBuffer: 4096)
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

/// An RFB server on a loopback port for one connection: it answers the handshake (RFB 3.8, no
/// authentication, a 256×256 screen), reads the client's setup (SetPixelFormat,
/// SetEncodings, the first FramebufferUpdateRequest), then sends one FramebufferUpdate (one
/// raw rectangle, the whole screen at 32 bits a pixel: 256 KiB) at its pace, and then
/// nothing until `close`.
final class PacedRFBServer: Sendable {
    enum Pace: Sendable {
        /// The update in `pieces` pieces, one every `intervalMs`.
        case steady(pieces: Int, intervalMs: Int)
        /// The update's headers, then one byte of its pixels every `intervalMs`, for a minute
        /// at most (or until the client is gone or `close`).
        case trickle(intervalMs: Int)
    }

    static let width = 256
    static let height = 256
    let port: Int
    private let listener: Int32
    private let connection = Mutex<Int32>(-1)
    /// When the update's first byte went out, and its last byte (or the last one the client
    /// took); whether the pace ran to its end.
    private let sent = Mutex<(first: ContinuousClock.Instant?, last: ContinuousClock.Instant?, finished: Bool)>((nil, nil, false))
    private let stopping = Atomic<Bool>(false)
    /// Signalled by `close`: the connection stays open until then (its end would fail the
    /// client), and is closed by the thread that uses it.
    private let closed = DispatchSemaphore(value: 0)

    init(pace: Pace) throws {
        (listener, port) = try loopbackListener(backlog: 4)
        let thread = Thread { [self] in serve(pace) }
        thread.start()
    }

    /// From the update's first byte to its last (or the last one sent before the client went
    /// away); nil before the first.
    var sendingSpan: Duration? {
        sent.withLock { s in s.first.map { first in (s.last ?? first) - first } }
    }

    /// The whole pace was sent.
    var finishedSending: Bool { sent.withLock { $0.finished } }

    private func serve(_ pace: Pace) {
        let fd = accept(listener, nil, nil)
        guard fd >= 0 else { return }
        connection.withLock { $0 = fd }
        defer {
            closed.wait()
            Glibc.close(fd)
        }
        func send(_ bytes: ArraySlice<UInt8>) -> Bool {
            var rest = bytes
            while !rest.isEmpty {
                let count = rest.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard count > 0 else { return false }
                rest.removeFirst(count)
            }
            return true
        }
        func receive(_ count: Int) -> [UInt8]? {
            var buffer = [UInt8](repeating: 0, count: count)
            return count == 0 || recv(fd, &buffer, count, Int32(MSG_WAITALL)) == count ? buffer : nil
        }
        let (width, height) = (Self.width, Self.height)
        guard send(ArraySlice("RFB 003.008\n".utf8)), receive(12) != nil,
            send([1, 1]), receive(1) != nil,  // one security type: None
            send([0, 0, 0, 0]), receive(1) != nil  // SecurityResult OK; ClientInit
        else { return }
        // ServerInit: the screen; 32 bits a pixel, depth 24, little-endian true colour, each
        // channel 0-255 at shifts 16, 8, 0, three bytes of padding; the name "pace".
        let format: [UInt8] = [32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0]
        let size: [UInt8] = [UInt8(width >> 8), UInt8(width & 255), UInt8(height >> 8), UInt8(height & 255)]
        guard send(ArraySlice(size + format + [0, 0, 0, 4] + Array("pace".utf8))) else { return }
        // The client's setup: SetPixelFormat (20 bytes), SetEncodings (4, then 4 a
        // encoding), FramebufferUpdateRequest (10). The client then waits for the update.
        guard receive(20) != nil, let encodings = receive(4), receive(4 * (Int(encodings[2]) << 8 | Int(encodings[3]))) != nil,
            receive(10) != nil
        else { return }
        // FramebufferUpdate: one rectangle, at 0,0, the whole screen, raw.
        let header: [UInt8] = [0, 0, 0, 1, 0, 0, 0, 0] + size + [0, 0, 0, 0]
        let update = header + [UInt8](repeating: 0x5A, count: width * height * 4)
        sent.withLock { $0.first = ContinuousClock.now }
        var finished = false
        switch pace {
        case .steady(let pieces, let intervalMs):
            let piece = (update.count + pieces - 1) / pieces
            var offset = 0
            while offset < update.count, !stopping.load(ordering: .relaxed) {
                if offset > 0 { usleep(UInt32(intervalMs * 1000)) }
                guard send(update[offset..<min(offset + piece, update.count)]) else { break }
                offset += piece
                sent.withLock { $0.last = ContinuousClock.now }
            }
            finished = offset >= update.count
        case .trickle(let intervalMs):
            guard send(update[0..<header.count]) else { break }
            var offset = header.count
            let end = min(update.count, header.count + 60_000 / intervalMs)
            while offset < end, !stopping.load(ordering: .relaxed) {
                usleep(UInt32(intervalMs * 1000))
                guard send(update[offset..<offset + 1]) else { break }
                offset += 1
                sent.withLock { $0.last = ContinuousClock.now }
            }
            finished = offset >= end
        }
        sent.withLock { $0.finished = finished }
    }

    /// Ends the connection and the listener (a thread waiting in `accept` returns; one
    /// pacing stops at its next step).
    func close() {
        stopping.store(true, ordering: .relaxed)
        let fd = connection.withLock { $0 }
        if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) }
        shutdown(listener, Int32(SHUT_RDWR))
        Glibc.close(listener)
        closed.signal()
    }
}
