import AgentCore

#if canImport(Glibc)
import Glibc
#endif

/// Whether something listens on a loopback port: a TCP connect to 127.0.0.1 and to [::1]
/// (closed at once). The kernel has no event for "a listener appeared", so an await on a
/// port probes every ``interval``; a probe on loopback is answered at once (accept or
/// refuse), bounded by ``connectTimeout`` all the same (a listener whose backlog is full
/// leaves the connect waiting).
enum PortProbe {
    static let interval: Duration = .milliseconds(50)
    static let connectTimeout = timeval(tv_sec: 0, tv_usec: 200_000)
    /// Where probes run: their connects block (up to ``connectTimeout`` each), so never on
    /// the cooperative pool. Each await has at most one probe queued, and the awaits are
    /// bounded (``ProcessManager/Configuration/maxAwaits``).
    static let pool = BlockingPool(name: "proc-ports", threads: 2, maxQueued: 4096)

    /// ``isOpen(_:)`` on ``pool``; false when the pool is full (the next probe may find
    /// room) or the calling task is cancelled.
    static func probe(_ port: UInt16) async -> Bool {
        (try? await pool.run { _ in PortProbe.isOpen(port) }) ?? false
    }

    static func isOpen(_ port: UInt16) -> Bool {
        connects(family: AF_INET, port: port) || connects(family: AF_INET6, port: port)
    }

    private static func connects(family: Int32, port: UInt16) -> Bool {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var timeout = connectTimeout
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if family == AF_INET {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
        }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = port.bigEndian
        address.sin6_addr = in6addr_loopback
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0 }
        }
    }
}
