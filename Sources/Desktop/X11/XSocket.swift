import AgentCore
import CDesktop
import CoreMetrics
#if canImport(Glibc)
import Glibc
#endif

/// A non-blocking unix stream socket to an X server's display whose reads and writes wait
/// with `poll(2)`, bounded as one call from the connect on by the VNC client's rule
/// (`desktop_vnc_deadline_passed`) over the bytes read so far: the connection may go
/// `timeout` with no byte arriving, and may last `timeout` plus what its bytes take at
/// `floor` bytes a second, and `DESKTOP_VNC_CALL_CEILING_MS` (120 s) in all. So a large
/// image that keeps arriving (8 MiB for a 1920×1080 screen) is never cut short however
/// starved the host, while a server that stops answering fails the call `timeout` after its
/// last byte, and one trickling bytes below the floor about `timeout` after the call began.
/// Each poll waits at most until the rule's next deadline; the rule is checked after each
/// read that got bytes, and before each wait with the time taken before the read that found
/// none (so a reader that was itself descheduled never fails on bytes that were waiting).
/// The descriptor closes with the object. One thread at a time.
final class XSocket {
    let display: Int
    private let fd: Int32
    /// The connection's deadline (begun at the connect), fed the bytes read so far.
    private var deadline: desktop_vnc_deadline
    private var bytesRead: UInt64 = 0
    /// The silence bound as said in the timeout error ("10 seconds").
    private let timeout: Duration

    /// Connects to `/tmp/.X11-unix/X<display>`, else to the abstract socket of that name.
    init(display: Int, timeout: Duration, floor: Int) throws(DesktopError) {
        self.display = display
        self.timeout = timeout
        var deadline = desktop_vnc_deadline()
        desktop_vnc_deadline_begin(&deadline, Self.milliseconds(timeout), Int32(clamping: floor), Self.monotonicMilliseconds(), 0)
        self.deadline = deadline
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
            let tried = Self.monotonicMilliseconds()
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                sent += n
            } else if n < 0 && (errno == EAGAIN || errno == EINTR) {
                try wait(for: Int16(POLLOUT), tried: tried)
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
                let tried = Self.monotonicMilliseconds()
                let n = recv(fd, storage.baseAddress! + received, count - received, 0)
                if n > 0 {
                    received += n
                    bytesRead += UInt64(n)
                    // Progress; still no more than the bytes earned at the floor, nor the ceiling.
                    do throws(DesktopError) {
                        try check(at: tried)
                    } catch {
                        failure = error
                        break
                    }
                } else if n == 0 {
                    failure = DesktopError("the X server of display :\(display) closed the connection")
                    break
                } else if errno == EAGAIN || errno == EINTR {
                    do throws(DesktopError) {
                        try wait(for: Int16(POLLIN), tried: tried)
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

    /// Fails when the deadline has passed at `now` (counted in
    /// `agent_desktop_x_timeouts_total`), recording the bytes read so far as progress.
    private func check(at now: Int64) throws(DesktopError) {
        guard desktop_vnc_deadline_passed(&deadline, now, bytesRead) != 0 else { return }
        DesktopMetrics.xTimeouts.increment()
        throw DesktopError("the X server of display :\(display) did not answer within \(timeout)")
    }

    /// After a send or recv begun at `tried` found the socket not ready: fails if the
    /// deadline had passed by then, else waits until `events` are possible or until the
    /// deadline would pass with nothing more arriving (the caller then tries again, and
    /// comes back here to fail if there is still nothing).
    private func wait(for events: Int16, tried: Int64) throws(DesktopError) {
        try check(at: tried)
        let left = desktop_vnc_deadline_left_ms(&deadline, Self.monotonicMilliseconds())
        var pfd = pollfd(fd: fd, events: events, revents: 0)
        if poll(&pfd, 1, Int32(clamping: left)) < 0 && errno != EINTR {
            throw DesktopError("\(SystemCallError(call: "poll", errno: errno))")
        }
    }

    /// CLOCK_MONOTONIC in milliseconds, as the VNC client's deadline guard reads it.
    private static func monotonicMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// `duration` in whole milliseconds (0.3 seconds: 300), saturating at `Int32`'s bounds.
    private static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        let limit = Int64(Int32.max / 1000)
        guard seconds > -limit, seconds < limit else { return seconds < 0 ? 0 : Int32.max }
        return Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
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
