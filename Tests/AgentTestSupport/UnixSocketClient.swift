import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A raw unix-socket client for byte-level tests; blocking calls run on their own thread.
public final class UnixSocketClient: Sendable {
    public let fd: Int32

    public init?(path: String) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            close(fd)
            return nil
        }
        self.fd = fd
    }

    deinit { close(fd) }

    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    /// Everything until the peer closes or `timeout` passes (bounded).
    public func readAll(timeout: Duration = .seconds(10)) async -> (bytes: [UInt8], closed: Bool) {
        let fd = fd
        return await onThread {
            var out: [UInt8] = []
            let deadline = ContinuousClock.now + timeout
            var buffer = [UInt8](repeating: 0, count: 65536)
            while ContinuousClock.now < deadline {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let left = max(1, Int32((deadline - .now) / .milliseconds(1)))
                guard poll(&poller, 1, min(left, 100)) > 0 else { continue }
                let n = recv(fd, &buffer, buffer.count, 0)
                if n <= 0 { return (out, true) }
                out += buffer[0..<n]
            }
            return (out, false)
        }
    }

    /// At least `count` bytes, or what arrived when the peer closed or `timeout` passed.
    public func read(atLeast count: Int, timeout: Duration = .seconds(10)) async -> [UInt8] {
        let fd = fd
        return await onThread {
            var out: [UInt8] = []
            let deadline = ContinuousClock.now + timeout
            var buffer = [UInt8](repeating: 0, count: 65536)
            while out.count < count, ContinuousClock.now < deadline {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 100) > 0 else { continue }
                let n = recv(fd, &buffer, buffer.count, 0)
                if n <= 0 { break }
                out += buffer[0..<n]
            }
            return out
        }
    }
}
