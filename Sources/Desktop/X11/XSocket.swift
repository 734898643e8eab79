import AgentCore
import CoreMetrics
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// A non-blocking unix stream socket to an X server's display whose reads and writes wait
/// with `poll(2)`, never past one deadline: whatever the server does, a call returns or
/// fails by then. The descriptor closes with the object.
final class XSocket {
    let display: Int
    private let fd: Int32
    private let deadline: DispatchTime
    /// The bound as said in the timeout error ("10 seconds").
    private let timeout: Duration

    /// Connects to `/tmp/.X11-unix/X<display>`, else to the abstract socket of that name.
    init(display: Int, deadline: DispatchTime, timeout: Duration) throws(DesktopError) {
        self.display = display
        self.deadline = deadline
        self.timeout = timeout
        let path = Array("/tmp/.X11-unix/X\(display)".utf8)
        var connected = Self.connect(path, abstract: false)
        if case .failure = connected { connected = Self.connect(path, abstract: true) }
        switch connected {
        case .success(let fd): self.fd = fd
        case .failure(let error): throw DesktopError("cannot connect to X display :\(display): \(error)")
        }
    }

    deinit { close(fd) }

    func write(_ bytes: [UInt8]) throws(DesktopError) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                sent += n
            } else if n < 0 && (errno == EAGAIN || errno == EINTR) {
                try wait(for: Int16(POLLOUT))
            } else {
                throw DesktopError("writing to X display :\(display): \(SystemCallError(call: "send", errno: errno))")
            }
        }
    }

    /// Exactly `count` bytes (the caller bounds `count`). The buffer is not zeroed first
    /// (an image reply is megabytes): what it returns was all received.
    func read(_ count: Int) throws(DesktopError) -> [UInt8] {
        var failure: DesktopError?
        let buffer = [UInt8](unsafeUninitializedCapacity: count) { storage, initialized in
            var received = 0
            while received < count {
                let n = recv(fd, storage.baseAddress! + received, count - received, 0)
                if n > 0 {
                    received += n
                } else if n == 0 {
                    failure = DesktopError("the X server of display :\(display) closed the connection")
                    break
                } else if errno == EAGAIN || errno == EINTR {
                    do throws(DesktopError) {
                        try wait(for: Int16(POLLIN))
                    } catch {
                        failure = error
                        break
                    }
                } else {
                    failure = DesktopError("reading from X display :\(display): \(SystemCallError(call: "recv", errno: errno))")
                    break
                }
            }
            // Only what was received counts as initialized (all of it, unless it failed).
            initialized = received
        }
        if let failure { throw failure }
        return buffer
    }

    /// Waits until `events` are possible, or fails at the deadline (counted in
    /// `agent_desktop_x_timeouts_total`).
    private func wait(for events: Int16) throws(DesktopError) {
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            guard deadline.uptimeNanoseconds > now else {
                DesktopMetrics.xTimeouts.increment()
                throw DesktopError("the X server of display :\(display) did not answer within \(timeout)")
            }
            let left = Int32(min((deadline.uptimeNanoseconds - now) / 1_000_000 + 1, UInt64(Int32.max)))
            var pfd = pollfd(fd: fd, events: events, revents: 0)
            let rc = poll(&pfd, 1, left)
            if rc > 0 { return }
            if rc < 0 && errno != EINTR { throw DesktopError("\(SystemCallError(call: "poll", errno: errno))") }
        }
    }

    /// A non-blocking, close-on-exec stream socket connected to `path`, or to the abstract
    /// name `path` (no file; the address is the name's exact length, as X servers bind it).
    private static func connect(_ path: [UInt8], abstract: Bool) -> Result<Int32, SystemCallError> {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return .failure(SystemCallError(call: "socket", errno: errno)) }
        let connect = { (address: UnsafePointer<sockaddr>, length: socklen_t) in Glibc.connect(fd, address, length) }
        let text = String(decoding: path, as: UTF8.self)
        guard let rc = abstract ? UnixSocket.withAbstractAddress(path, connect) : UnixSocket.withAddress(text, connect) else {
            close(fd)
            return .failure(SystemCallError(call: "connect", errno: ENAMETOOLONG))
        }
        // A unix socket connects at once or not at all (EAGAIN: its backlog is full).
        guard rc == 0 else {
            let error = SystemCallError(call: "connect", errno: errno)
            close(fd)
            return .failure(error)
        }
        return .success(fd)
    }
}
