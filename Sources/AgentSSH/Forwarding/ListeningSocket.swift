import AgentCore
#if canImport(Glibc)
import Glibc
#endif

/// Listening sockets bound synchronously (so that a request is answered after its
/// listener exists and replies keep their order), then handed to NIO.
enum ListeningSocket {
    /// A listening Unix socket at `path` (mode 0600), or nil.
    static func unix(_ path: String) -> Int32? {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        let bound = UnixSocket.withAddress(path) { bind(fd, $0, $1) } ?? -1
        guard bound == 0, chmod(path, 0o600) == 0, listen(fd, 128) == 0 else {
            close(fd)
            unlink(path)
            return nil
        }
        return fd
    }

    /// A listening TCP socket on 127.0.0.1:`port`, or nil when the port is taken.
    static func loopbackTCP(port: UInt16) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 128) == 0 else {
            close(fd)
            return nil
        }
        return fd
    }

}
