import Glibc
import NIOPosix
import Testing
@testable import Tailnet

/// The UDP sockets' ports: each family tries the configured port, then any.
@Suite struct MagicSocketTests {
    /// A UDP socket of `family` bound to its unspecified address on `port` (0: any); its
    /// descriptor and port, or nil when the family is not available here.
    static func bound(_ family: Int32, port: UInt16) -> (fd: Int32, port: UInt16)? {
        let fd = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        if family == AF_INET6 { setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size)) }
        var address = sockaddr_storage()
        address.ss_family = sa_family_t(family)
        withUnsafeMutableBytes(of: &address) { $0.storeBytes(of: port.bigEndian, toByteOffset: 2, as: UInt16.self) }
        let size = socklen_t(family == AF_INET6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, size) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok else {
            close(fd)
            return nil
        }
        let bound = withUnsafeBytes(of: &address) { UInt16(bigEndian: $0.load(fromByteOffset: 2, as: UInt16.self)) }
        return (fd, bound)
    }

    @Test func aPortTakenInOneFamilyCostsThatFamilyOnlyThePort() async throws {
        guard let taken = Self.bound(AF_INET6, port: 0) else { return }  // no IPv6 here
        defer { close(taken.fd) }
        // The same port is free for IPv4 (almost surely: another process would have to hold it).
        guard let probe = Self.bound(AF_INET, port: taken.port) else { return }
        close(probe.fd)
        let socket = try await MagicSocket.bind(port: taken.port, eventLoop: MultiThreadedEventLoopGroup.singleton.next()) { _, _ in }
        #expect(socket.v4Port == taken.port)
        #expect(socket.v6Port != nil && socket.v6Port != taken.port, "IPv6 on another port: \(String(describing: socket.v6Port))")
        await socket.close()
    }
}
