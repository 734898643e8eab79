import AgentTestSupport
import Foundation
import Glibc
import NIOCore
import NIOPosix
import Synchronization
import TunnelStack

/// Addresses for one test's stack: the agent's two (fd7a and fd60), with a last byte of
/// its own so that stacks of different tests never share one.
func stackAddresses(_ index: UInt8) -> [TunnelAddress] {
    let suffix = String(format: "%02x", index)
    return [
        TunnelAddress("fd7a:115c:a1e0:def0:1234:5678:9abc:de\(suffix)")!,
        TunnelAddress("fd60:627a:a42b:def0:1234:5678:9abc:de\(suffix)")!,
    ]
}

/// Port 4 served by ``OneRequestHandler``: each connection's peer is recorded in `served`.
func httpAcceptor(served: Recorder) -> [UInt16: TunnelAcceptor] {
    [
        4: TunnelAcceptor { channel in
            channel.eventLoop.makeCompletedFuture {
                let peer = channel.remoteAddress.map { "[\($0.ipAddress ?? "?")]:\($0.port ?? 0)" } ?? "?"
                served.append(peer)
                try channel.pipeline.syncOperations.addHandler(OneRequestHandler(peer: peer))
            }
        }
    ]
}

/// Serves one HTTP request on a tunnel channel: answers 200 with a body naming the peer,
/// then closes.
final class OneRequestHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let peer: String
    private var request: [UInt8] = []
    private var answered = false

    init(peer: String) {
        self.peer = peer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        // Bounded: at most 64 KiB of request head.
        guard !answered, request.count < 65536 else { return }
        request += buffer.readableBytesView
        guard request.ends(with: Array("\r\n\r\n".utf8)) else { return }
        answered = true
        let line = String(decoding: request.prefix { $0 != 13 }, as: UTF8.self)
        let body = "hello \(peer) \(line)\n"
        let response = "HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: response))).whenComplete { _ in channel.close(promise: nil) }
    }
}

extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}

/// Deterministic test data: `count` bytes of `(i * step + offset) mod 256`.
func pattern(_ count: Int, step: Int, offset: Int) -> [UInt8] {
    // One 256-byte period, copied: a closure per byte over 10 MiB takes seconds in a debug
    // build, holding one of the two cooperative threads the in-process stack needs.
    let period = (0..<256).map { UInt8(truncatingIfNeeded: $0 &* step &+ offset) }
    var out: [UInt8] = []
    out.reserveCapacity(count + period.count)
    while out.count < count { out += period }
    out.removeLast(out.count - count)
    return out
}

/// The same bytes in Python.
func pythonPattern(_ count: Int, step: Int, offset: Int) -> String {
    "(bytes(((i*\(step)+\(offset)) & 255) for i in range(256)) * (\(count)//256 + 1))[:\(count)]"
}

/// The loop lwIP runs on in the test process: its own thread, not one of NIO's singleton
/// loops that every other in-process server shares (a busy one delayed local connects and
/// handshakes past the stack's deadlines). The first stack's choice holds for the process.
let lwIPTestLoop: any EventLoop = MultiThreadedEventLoopGroup(numberOfThreads: 1).next()

/// A Python client that connects to `host`:`port`, sends `size` bytes of pattern (7, 3)
/// while it reads until the server's end, and prints `received N match B seconds S`, where
/// the match is against pattern (13, 5).
func pythonTransferScript(host: String, port: Int, size: Int) -> String {
    """
    import socket, threading, time
    out = \(pythonPattern(size, step: 7, offset: 3))
    expected = \(pythonPattern(size, step: 13, offset: 5))
    s = socket.create_connection(('\(host)', \(port)), timeout=120)
    start = time.monotonic()
    def send():
        s.sendall(out)
        s.shutdown(socket.SHUT_WR)
    sender = threading.Thread(target=send)
    sender.start()
    chunks = []
    while True:
        data = s.recv(1 << 20)
        if not data:
            break
        chunks.append(data)
    sender.join()
    elapsed = time.monotonic() - start
    data = b''.join(chunks)
    print('received', len(data), 'match', data == expected, 'seconds %.3f' % elapsed)
    """
}

/// A TCP server on 127.0.0.1 in the test's namespace that takes `connections` connections
/// one after the other on a thread of its own and runs `body` with each connected
/// descriptor and its index (closing it afterwards). Its port is the kernel's choice, read
/// back after the bind: a port picked beforehand could be taken by a concurrent test in
/// between. `closed` runs after each connection's descriptor was closed.
final class LocalServer: Sendable {
    let port: Int
    private let listener: Int32
    let finished = TestFlag()

    convenience init?(body: @escaping @Sendable (Int32) -> Void) {
        self.init(connections: 1) { connection, _ in body(connection) }
    }

    init?(
        connections: Int, closed: (@Sendable (Int) -> Void)? = nil, body: @escaping @Sendable (Int32, Int) -> Void
    ) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        guard bound == 0, named == 0, listen(listener, 16) == 0 else {
            close(listener)
            return nil
        }
        self.port = Int(UInt16(bigEndian: address.sin_port))
        self.listener = listener
        let finished = self.finished
        Thread {
            for index in 0..<connections {
                var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
                // Bounded: the test connects within a minute or the server gives up.
                guard poll(&poller, 1, 60_000) > 0 else { break }
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { break }
                body(connection, index)
                close(connection)
                closed?(index)
            }
            finished.set()
        }.start()
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}

/// Writes all of `bytes` to a blocking descriptor; false on error.
func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let count = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, min($0.count, 1 << 20)) }
        if count < 0, errno == EINTR { continue }
        if count <= 0 { return false }
        offset += count
    }
    return true
}

/// Reads from a blocking descriptor until EOF or `limit` bytes.
func readAll(_ descriptor: Int32, limit: Int) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(min(limit, 16 << 20))
    var chunk = [UInt8](repeating: 0, count: 65536)
    while bytes.count < limit {
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, min($0.count, limit - bytes.count)) }
        if count < 0, errno == EINTR { continue }
        if count <= 0 { break }
        bytes += chunk[..<count]
    }
    return bytes
}

/// Texts recorded from other threads.
final class Recorder: Sendable {
    private let items = Mutex<[String]>([])

    func append(_ item: String) { items.withLock { $0.append(item) } }
    var all: [String] { items.withLock { $0 } }
}
