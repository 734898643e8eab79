import AgentCore
import Dispatch
import FoundationEssentials
import Glibc

/// Blocking loopback checks used while a desktop starts (run off the cooperative pool).
///
/// A VNC server counts every connection that closes before authenticating as a security
/// failure, and after five it refuses the host for a while ("Too many security failures"):
/// so whether a port serves is read from the kernel's socket table, not by connecting.
enum LoopbackProbe {
    /// Whether some socket listens on TCP `port` (IPv4 or IPv6), from /proc/net/tcp{,6}.
    static func isListening(port: Int) -> Bool {
        let suffix = ":" + zeroPadded(port, width: 4, radix: 16, uppercase: true)
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ", maxSplits: 4, omittingEmptySubsequences: true)
                if fields.count > 3, fields[3] == "0A", fields[1].hasSuffix(suffix) { return true }
            }
        }
        return false
    }

    /// A TCP port on 127.0.0.1 that nothing listens on now (bound, then released).
    static func freePort() -> Int? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { return nil }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether 127.0.0.1:`port` answers with an RFB banner (`RFB 003.`) within `timeoutMs`.
    static func rfbBanner(port: Int, timeoutMs: Int32 = 1000) -> Bool {
        guard let fd = connect(port: port) else { return false }
        defer { close(fd) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 12)
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(timeoutMs) * 1_000_000
        while received.count < 8 {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { return false }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, Int32((deadline - now) / 1_000_000) + 1) > 0 else { return false }
            let n = recv(fd, &buffer, buffer.count, 0)
            guard n > 0 else { return false }
            received += buffer[0..<n]
        }
        return received.starts(with: Array("RFB 003.".utf8))
    }

    /// A connected TCP socket to 127.0.0.1:`port`, or nil.
    static func connect(port: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = loopback(port: port)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            return nil
        }
        return fd
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        address.sin_port = UInt16(port).bigEndian
        return address
    }
}
