import Glibc

/// A tunnel connection handed to the HTTP handler: one end of a unix stream socketpair;
/// the stack relays the other end to the tunnel peer, so whatever serves this descriptor
/// (an HTTP server) talks to the peer. Closing it (or shutting down its write side) ends
/// the connection toward the peer.
///
/// The descriptor is owned by this value: ``takeFileDescriptor()`` hands it over;
/// dropping the value unused closes it.
public struct TunnelConnection: ~Copyable, Sendable {
    private var descriptor: CInt
    /// The peer's address (e.g. coderd's fd7a:115c:a1e0::/48 address) and port.
    public let remoteAddress: TunnelAddress
    public let remotePort: UInt16
    /// The stack's address and port the peer dialled.
    public let localAddress: TunnelAddress
    public let localPort: UInt16

    init(descriptor: CInt, remoteAddress: TunnelAddress, remotePort: UInt16, localAddress: TunnelAddress, localPort: UInt16) {
        self.descriptor = descriptor
        self.remoteAddress = remoteAddress
        self.remotePort = remotePort
        self.localAddress = localAddress
        self.localPort = localPort
    }

    /// The peer as text: `[address]:port`.
    public var remoteAddressText: String { "[\(remoteAddress)]:\(remotePort)" }

    /// The socket descriptor (blocking, close-on-exec); the caller owns it from now on.
    public consuming func takeFileDescriptor() -> CInt {
        let descriptor = self.descriptor
        discard self
        return descriptor
    }

    deinit {
        close(descriptor)
    }
}

/// Serves one tunnel connection (see ``TunnelConnection``). Called on an event loop of the
/// stack's group: it must not block.
public typealias TunnelConnectionHandler = @Sendable (consuming TunnelConnection) -> Void

/// Why a ``TunnelStack`` could not start.
public struct TunnelStackError: Error, CustomStringConvertible, Sendable {
    public let description: String
}
