import DERP
import NIOCore
import NIOPosix
#if canImport(Glibc)
import Glibc
#endif

/// The tailnet's UDP sockets, one per family, carrying STUN, disco and WireGuard: bound to
/// every address on the configured port (IPv6 first; each tries the port, then 0), with
/// don't-fragment on. NIO reads them on the engine's event loop; sends are plain
/// non-blocking `sendto` calls on a duplicate of the descriptor, because NIO closes a
/// datagram channel on a send error such as "network unreachable" (a link going down), which
/// a path that must survive link changes cannot afford. A send that would block is dropped
/// (UDP is lossy; nothing queues, so memory is bounded by the kernel's socket buffer).
final class MagicSocket: Sendable {
    private struct Family: Sendable {
        let channel: any Channel
        /// Our duplicate of the channel's descriptor, for sends; closed with the socket.
        let sendFD: Int32
        let port: UInt16
    }

    private let v4: Family?
    private let v6: Family?

    private init(v4: Family?, v6: Family?) {
        self.v4 = v4
        self.v6 = v6
    }

    var v4Port: UInt16? { v4?.port }
    var v6Port: UInt16? { v6?.port }

    /// 7 MiB socket buffers (the kernel caps them at its maximum).
    static let bufferBytes: Int32 = 7 << 20

    /// Binds both families; `receive` gets every datagram (on the loop).
    static func bind(
        port: UInt16, eventLoop: any EventLoop,
        receive: @escaping @Sendable (ByteBuffer, DiscoEndpoint) -> Void
    ) async throws -> MagicSocket {
        // Each family: the configured port, else any (a port taken in one family only must
        // not cost that family its socket); no IPv6 at all is not an error.
        var v6 = try? await open(v6: true, port: port, eventLoop: eventLoop, receive: receive)
        if v6 == nil, port != 0 { v6 = try? await open(v6: true, port: 0, eventLoop: eventLoop, receive: receive) }
        let v4: Family
        do {
            v4 = try await open(v6: false, port: port, eventLoop: eventLoop, receive: receive)
        } catch {
            guard port != 0, let fallback = try? await open(v6: false, port: 0, eventLoop: eventLoop, receive: receive) else {
                if let v6 { await close(v6) }
                throw error
            }
            v4 = fallback
        }
        return MagicSocket(v4: v4, v6: v6)
    }

    struct SocketError: Error, CustomStringConvertible {
        let description: String
    }

    private static func open(
        v6: Bool, port: UInt16, eventLoop: any EventLoop, receive: @escaping @Sendable (ByteBuffer, DiscoEndpoint) -> Void
    ) async throws -> Family {
        let fd = socket(v6 ? AF_INET6 : AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SocketError(description: "socket: errno \(errno)") }
        func option(_ level: Int32, _ name: Int32, _ value: Int32) {
            var value = value
            _ = setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
        }
        option(SOL_SOCKET, SO_RCVBUF, bufferBytes)
        option(SOL_SOCKET, SO_SNDBUF, bufferBytes)
        if v6 {
            option(Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1)
            option(Int32(IPPROTO_IPV6), IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO)
        } else {
            option(Int32(IPPROTO_IP), IP_MTU_DISCOVER, IP_PMTUDISC_DO)
        }
        // The unspecified address of the family (all zeros); `sin_port` and `sin6_port` are
        // both at byte 2.
        var address = sockaddr_storage()
        address.ss_family = sa_family_t(v6 ? AF_INET6 : AF_INET)
        withUnsafeMutableBytes(of: &address) { $0.storeBytes(of: port.bigEndian, toByteOffset: 2, as: UInt16.self) }
        var length = socklen_t(v6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok else {
            let code = errno
            Glibc.close(fd)
            throw SocketError(description: "bind \(v6 ? "[::]" : "0.0.0.0"):\(port): errno \(code)")
        }
        let bound = withUnsafeBytes(of: address) { UInt16(bigEndian: $0.load(fromByteOffset: 2, as: UInt16.self)) }
        let sendFD = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        guard sendFD >= 0 else {
            Glibc.close(fd)
            throw SocketError(description: "dup: errno \(errno)")
        }
        do {
            let channel = try await DatagramBootstrap(group: eventLoop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(MagicSocketHandler(receive: receive)) }
                }
                .withBoundSocket(fd).get()
            return Family(channel: channel, sendFD: sendFD, port: bound)
        } catch {
            Glibc.close(sendFD)
            throw error
        }
    }

    /// Sends a datagram: sent, lost (refused by a local firewall rule, or the buffer is
    /// full), or failed (no socket of that family, no route, ...).
    func send(_ bytes: [UInt8], to endpoint: DiscoEndpoint) -> UDPSendOutcome {
        if let v4 = endpoint.ipv4 {
            guard let family = self.v4 else { return .failed }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = endpoint.port.bigEndian
            withUnsafeMutableBytes(of: &address.sin_addr) { $0.copyBytes(from: v4) }
            return Self.send(bytes, on: family.sendFD, to: &address)
        }
        guard let family = self.v6, endpoint.address.count == 16 else { return .failed }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = endpoint.port.bigEndian
        withUnsafeMutableBytes(of: &address.sin6_addr) { $0.copyBytes(from: endpoint.address) }
        return Self.send(bytes, on: family.sendFD, to: &address)
    }

    /// One non-blocking `sendto` to a `sockaddr_in` or `sockaddr_in6`: whole or not at all.
    private static func send<Address>(_ bytes: [UInt8], on fd: Int32, to address: inout Address) -> UDPSendOutcome {
        let written = bytes.withUnsafeBytes { data in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, data.baseAddress, data.count, Int32(MSG_DONTWAIT), $0, socklen_t(MemoryLayout<Address>.size))
                }
            }
        }
        if written == bytes.count { return .sent }
        let code = errno
        return written < 0 && (code == EPERM || code == EAGAIN || code == EWOULDBLOCK) ? .lost : .failed
    }

    func close() async {
        if let v4 { await Self.close(v4) }
        if let v6 { await Self.close(v6) }
    }

    private static func close(_ family: Family) async {
        try? await family.channel.close()
        Glibc.close(family.sendFD)
    }
}

/// Hands each datagram and its source to the owner.
private final class MagicSocketHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    let receive: @Sendable (ByteBuffer, DiscoEndpoint) -> Void

    init(receive: @escaping @Sendable (ByteBuffer, DiscoEndpoint) -> Void) { self.receive = receive }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        guard let source = DiscoEndpoint(envelope.remoteAddress) else { return }
        receive(envelope.data, source)
    }

    /// A read error (an ICMP error NIO treats as recoverable) is not fatal to the path.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {}
}

extension DiscoEndpoint {
    /// The endpoint of a NIO socket address.
    init?(_ address: SocketAddress) {
        switch address {
        case .v4(let v4):
            let raw = withUnsafeBytes(of: v4.address.sin_addr) { Array($0) }
            self.init(raw: raw, port: UInt16(bigEndian: v4.address.sin_port))
        case .v6(let v6):
            let raw = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            self.init(raw: raw, port: UInt16(bigEndian: v6.address.sin6_port))
        default:
            return nil
        }
    }
}
