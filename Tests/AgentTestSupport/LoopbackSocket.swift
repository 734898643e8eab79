import AgentCore
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A plain socket to a loopback port or a unix socket, for tests that need thousands of
/// connections or byte-exact control (half-sent heads, unmasked frames, raw dRPC frames).
/// Every read is bounded by a timeout and never blocks a cooperative thread.
public final class LoopbackSocket: @unchecked Sendable {
    // @unchecked: the descriptor is only used by the test that owns the socket, one call at
    // a time; nothing is shared between tasks.
    public let fd: Int32

    /// Connects to 127.0.0.1:`port`; nil when the connection is refused or not made within
    /// `timeout`. The connect does not block a cooperative thread: a server whose accept
    /// queue is full drops the SYN, and the kernel's retries take seconds.
    public static func connect(port: Int, timeout: Duration = .seconds(60)) async -> LoopbackSocket? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        let rc = connectLoopback(fd, port: port)
        var connected = rc == 0
        if rc != 0, errno == EINPROGRESS {
            var deadline = PollDeadline(timeout)
            while !deadline.hasPassed {
                var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                if poll(&entry, 1, 0) == 1 {
                    var error: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    connected = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0
                    break
                }
                await deadline.sleep(.milliseconds(5))
            }
        }
        // Back to blocking: the sends and reads below expect it.
        guard connected, fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0 else {
            close(fd)
            return nil
        }
        return LoopbackSocket(descriptor: fd)
    }

    /// Connects to 127.0.0.1:`port`, blocking until the kernel answers; nil when refused.
    /// Only for a test's own thread (``onThread(_:)``); tasks use ``connect(port:timeout:)``.
    public init?(port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        let rc = Self.connectLoopback(fd, port: port)
        guard rc == 0 else {
            close(fd)
            return nil
        }
        self.fd = fd
        Self.boundSends(fd)
    }

    /// `connect(2)` of `fd` to 127.0.0.1:`port`: its return value (errno set on -1).
    private static func connectLoopback(_ fd: Int32, port: Int) -> Int32 {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// Connects to the unix socket at `path`; nil when that fails.
    public init?(unixPath path: String) {
        guard case .success(let fd) = UnixSocket.connect(path) else { return nil }
        self.fd = fd
        Self.boundSends(fd)
    }

    /// Takes ownership of a connected stream socket (one end of ``pair()``).
    public init(descriptor: Int32) {
        self.fd = descriptor
        Self.boundSends(descriptor)
    }

    /// How long one blocking send may wait for room: a peer that stops reading fails the send
    /// (``send(_:)`` returns false) instead of holding the test's thread, which its time
    /// limit cannot reach, for good.
    public static let sendTimeout: Duration = .seconds(60)

    private static func boundSends(_ fd: Int32) {
        var bound = timeval(tv_sec: Int(sendTimeout.components.seconds), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, socklen_t(MemoryLayout<timeval>.size))
    }

    /// A connected unix socketpair: our end, and the other end's descriptor to hand over
    /// (to the HTTP API as a channel through ``ChannelHandOver``, as the tailnet hands over
    /// each tunnel connection). Close-on-exec both, so no child a test starts inherits them.
    public static func pair() -> (ours: LoopbackSocket, theirs: Int32) {
        var fds: [Int32] = [-1, -1]
        let rc = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds)
        precondition(rc == 0, "socketpair failed: errno \(errno)")
        return (LoopbackSocket(descriptor: fds[0]), fds[1])
    }

    /// Both ends of a socketpair as raw descriptors (for clients that adopt theirs, such as
    /// ``RawHTTPClient/request(over:_:_:headers:body:timeout:)``).
    public static func descriptorPair() -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        let rc = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds)
        precondition(rc == 0, "socketpair failed: errno \(errno)")
        return (fds[0], fds[1])
    }

    deinit { close(fd) }

    /// Sends every byte (false if the peer is gone, or left no room for ``sendTimeout``).
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            // With a send timeout, the kernel never restarts a send a signal interrupted.
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    @discardableResult
    public func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Ends our side of the stream (the peer reads EOF); reading goes on.
    public func shutdownWrite() { _ = shutdown(fd, Int32(SHUT_WR)) }

    /// Shrinks the kernel receive buffer (a client that reads slowly, or not at all).
    public func setReceiveBuffer(_ bytes: Int32) {
        var value = bytes
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// What arrives until the peer closes or `timeout` passes; the flag says whether the
    /// peer closed. Polls without blocking, so the test's task never holds one of Swift's
    /// cooperative threads (the server under test needs them).
    public func readAll(timeout: Duration = .seconds(10)) async -> (bytes: [UInt8], closed: Bool) {
        await read(timeout: timeout) { _ in false }
    }

    /// Reads until the bytes contain `marker` (or the peer closes, or `timeout` passes).
    public func read(until marker: String, timeout: Duration = .seconds(10)) async -> [UInt8] {
        let needle = Array(marker.utf8)
        return await read(timeout: timeout) { $0.firstRange(of: needle) != nil }.bytes
    }

    /// At least `count` bytes, or what arrived when the peer closed or `timeout` passed.
    public func read(atLeast count: Int, timeout: Duration = .seconds(10)) async -> [UInt8] {
        await read(timeout: timeout) { $0.count >= count }.bytes
    }

    /// The polling loop of the reads above: until `done` holds for what arrived, the peer
    /// closes or `timeout` passes (time the poll could not run does not count: ``PollDeadline``).
    private func read(timeout: Duration, until done: ([UInt8]) -> Bool) async -> (bytes: [UInt8], closed: Bool) {
        var deadline = PollDeadline(timeout)
        var out: [UInt8] = []
        while !done(out), !deadline.hasPassed {
            switch receive() {
            case .data(let bytes): out += bytes
            case .closed: return (out, true)
            case .nothing: await deadline.sleep(.milliseconds(5))
            }
        }
        return (out, false)
    }

    /// Reads until the bytes contain `needle`, the peer closes or `timeout` passes, blocking
    /// in `poll(2)`: only for a test's own thread (``onThread(_:)``), where a client must
    /// answer in time even when the cooperative threads are busy.
    public func readBlocking(until needle: [UInt8], timeout: Duration) -> (bytes: [UInt8], closed: Bool) {
        let deadline = ContinuousClock.now + timeout
        var out: [UInt8] = []
        while out.firstRange(of: needle) == nil, ContinuousClock.now < deadline {
            switch receive() {
            case .data(let bytes): out += bytes
            case .closed: return (out, true)
            case .nothing:
                var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, 10)
            }
        }
        return (out, false)
    }

    /// True once the peer has closed (EOF or reset), waiting at most `timeout`.
    public func isClosedByPeer(within timeout: Duration) async -> Bool {
        await readAll(timeout: timeout).closed
    }

    private enum Received {
        case data([UInt8])
        case closed
        case nothing
    }

    private func receive() -> Received {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if n > 0 { return .data(Array(buffer[0..<n])) }
        if n == 0 { return .closed }
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? .nothing : .closed
    }

    /// Raises this process's open-file soft limit to its hard limit (tests with thousands of
    /// sockets).
    public static func raiseDescriptorLimit() {
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
    }
}

extension String {
    /// A complete WebSocket handshake for `path` (RFC 6455's sample key).
    public static func webSocketHandshake(_ path: String, headers: String = "") -> String {
        "GET \(path) HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\(headers)\r\n"
    }

    /// The HTTP status code of a response's first line, or nil.
    public static func httpStatus(of bytes: [UInt8]) -> Int? {
        let text = String(decoding: bytes.prefix(64), as: UTF8.self)
        let parts = text.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1.") else { return nil }
        return Int(parts[1])
    }
}

/// Runs blocking work (thousands of `connect` calls) on a thread of its own, so that it
/// does not hold one of Swift's cooperative threads.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

/// A loopback TCP port that was free a moment ago, for a server a test starts later.
///
/// Chosen below the kernel's ephemeral range (`ip_local_port_range`), so that no outgoing
/// connection gets it as its local port meanwhile: a client that dials the port before
/// the server is up could otherwise connect to itself (TCP simultaneous open) and hold it.
/// A port is never handed out twice in one test process, so that two concurrent tests
/// cannot both pick it and race to bind it. Bounded: at most 200 random candidates, then
/// any free port.
public func freeLoopbackPort() -> Int {
    let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))?
        .split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
    let low = range?.first ?? 32768
    if low > 11_000 {
        for _ in 0..<200 {
            let candidate = Int.random(in: 10_000..<low)
            guard handedOutPorts.withLock({ $0.insert(candidate).inserted }) else { continue }
            if boundLoopbackPort(candidate) == candidate { return candidate }
        }
    }
    return boundLoopbackPort(0) ?? 0
}

/// Ports `freeLoopbackPort` returned or tried (at most 200 per call; a test run makes a
/// few dozen calls).
private let handedOutPorts = Mutex<Set<Int>>([])

/// Binds a loopback socket to `port` (0: any), closes it, and returns the port it had.
private func boundLoopbackPort(_ port: Int) -> Int? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { return nil }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Leaves a stale socket file at `path`: bound, never listening, closed; 0 or the bind's errno.
/// (A listener closed again would not do: a child another test forked meanwhile may still
/// hold it, and then it answers.)
@discardableResult
public func makeStaleSocket(_ path: String) -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return errno }
    defer { close(fd) }
    return UnixSocket.withAddress(path) { bind(fd, $0, $1) } == 0 ? 0 : errno
}

/// Whether the unix socket at `path` accepts a connection. Its file appears at `bind`, before
/// its server calls `listen`: a client that connects in between is refused (`wg` then falls
/// back to kernel WireGuard and fails), so wait on this, not on the file.
public func unixSocketAccepts(_ path: String) -> Bool {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return UnixSocket.withAddress(path) { connect(fd, $0, $1) } == 0
}
