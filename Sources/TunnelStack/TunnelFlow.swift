import CLwIPGlue

/// One TCP connection through the tunnel: the peer's address and port, and the stack's.
struct TunnelFlow: Hashable, Sendable {
    var remote: TunnelAddress
    var remotePort: UInt16
    var local: TunnelAddress
    var localPort: UInt16

    init(remote: TunnelAddress, remotePort: UInt16, local: TunnelAddress, localPort: UInt16) {
        self.remote = remote
        self.remotePort = remotePort
        self.local = local
        self.localPort = localPort
    }

    /// The flow lwIP reports (ports in host order).
    init(_ flow: tl_flow) {
        var copy = flow
        remote = withUnsafeBytes(of: &copy.remote) { TunnelAddress(raw: $0) }
        local = withUnsafeBytes(of: &copy.local) { TunnelAddress(raw: $0) }
        remotePort = flow.remote_port
        localPort = flow.local_port
    }

    /// The C form, for lookups in lwIP's lists.
    var cFlow: tl_flow {
        var flow = tl_flow()
        withUnsafeMutableBytes(of: &flow.remote) { remote.store(into: $0) }
        withUnsafeMutableBytes(of: &flow.local) { local.store(into: $0) }
        flow.remote_port = remotePort
        flow.local_port = localPort
        return flow
    }
}
