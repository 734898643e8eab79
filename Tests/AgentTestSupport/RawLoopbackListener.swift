#if canImport(Glibc)
import Glibc
#endif

/// A listening socket on 127.0.0.1 and an ephemeral port, made with the system calls alone
/// (a test that accepts, or never accepts, by hand).
public enum RawLoopbackListener {
    /// The listening descriptor and its port; nil when it could not be made. `nonBlocking`:
    /// an `accept` that finds nothing returns at once (a test that waits in sleeps).
    public static func make(backlog: Int32, nonBlocking: Bool = false) -> (fd: Int32, port: Int)? {
        let flags = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        let fd = socket(AF_INET, flags, 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound, listen(fd, backlog) == 0 else {
            close(fd)
            return nil
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }
}
