#if canImport(Glibc)
import Glibc
#endif

/// Unix-domain socket addresses and a blocking connect, shared by the agent socket's server
/// (liveness check), its CLI client, the benchmarks and the tests.
public enum UnixSocket {
    /// The longest path a unix socket can have (`sun_path` holds 108 bytes with the NUL).
    public static let maxPathBytes = 107

    /// Runs `body` with the `sockaddr_un` for `path`; nil when the path is too long.
    public static func withAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T? {
        let bytes = Array(path.utf8)
        guard bytes.count <= maxPathBytes else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// Runs `body` with the `sockaddr_un` of the abstract name `name` (Linux: no file; the
    /// address is the name's exact length, as X servers bind theirs); nil when too long.
    public static func withAbstractAddress<T>(_ name: [UInt8], _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T? {
        guard name.count <= maxPathBytes else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw[0] = 0
            UnsafeMutableRawBufferPointer(rebasing: raw[1...]).copyBytes(from: name)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + name.count)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }

    /// A connected, blocking, close-on-exec stream socket to `path`, or the errno of the
    /// step that failed (ENAMETOOLONG for a path that does not fit). A listener whose backlog
    /// is full (it does not accept) is waited for at most `timeout`, then EAGAIN: the kernel
    /// bounds a unix socket's connect by its send timeout, reset to none once connected.
    public static func connect(_ path: String, timeout: Duration = .seconds(10)) -> Result<Int32, SystemCallError> {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(SystemCallError(call: "socket", errno: errno)) }
        let (seconds, attoseconds) = max(timeout, .microseconds(1)).components
        var limit = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        if limit.tv_sec == 0 && limit.tv_usec == 0 { limit.tv_usec = 1 }
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let result =
            withAddress(path) { Glibc.connect(fd, $0, $1) }
            ?? {
                errno = ENAMETOOLONG; return -1
            }()
        guard result == 0 else {
            let code = errno
            close(fd)
            return .failure(SystemCallError(call: "connect", errno: code))
        }
        var none = timeval()
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, socklen_t(MemoryLayout<timeval>.size))
        return .success(fd)
    }
}
