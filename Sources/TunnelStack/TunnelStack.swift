import NIOCore
import NIOPosix

/// A userspace TCP/IPv6 stack for the tailnet (lwIP), with no TUN and no privileges: the
/// owner feeds it the IPv6 packets WireGuard decrypted (``input(_:)``) and sends on what it
/// emits (`output`).
///
/// - Addresses: the agent's /128s (the fd7a:115c:a1e0::/48 and fd60:627a:a42b::/48 ones);
///   packets to anything else, IPv4, and everything but TCP and ICMPv6 echo are dropped.
///   Echo requests are answered.
/// - TCP by destination port: ``TunnelStackConfiguration/httpPort`` (4) → `httpHandler`
///   gets one end of a unix socketpair per connection (``TunnelConnection``); ports from
///   ``TunnelStackConfiguration/firstForwardedPort`` (9) up → relayed to 127.0.0.1:<port>,
///   connected before the handshake is answered, so the peer gets RST when nothing listens
///   there; other ports (0–8) → RST at once.
/// - Bounds: see ``TunnelStackConfiguration``; counters: ``counters()``.
///
/// Threads: lwIP runs process-wide (see `LwIPCore`); each stack is one lwIP netif, so
/// several stacks may live in one process (with different addresses). `input` and
/// `output` run under lwIP's core lock: `output` is called on whichever thread holds it
/// (the caller of `input`, an event loop of `group`, or lwIP's tcpip thread for
/// retransmissions) and must neither block nor call back into the stack. Call
/// ``shutdown()`` to stop: the netif holds the stack until then.
public final class TunnelStack: Sendable {
    private let core: StackCore

    /// Starts a stack on `addresses` (one to four /128s).
    /// - Parameters:
    ///   - output: takes each outgoing IPv6 packet (valid during the call only).
    ///   - httpHandler: serves connections to the HTTP port; nil resets them.
    ///   - group: runs the local sockets (forwards, socketpairs) and the timers.
    public init(
        addresses: [TunnelAddress], configuration: TunnelStackConfiguration = TunnelStackConfiguration(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        output: @escaping @Sendable (UnsafeRawBufferPointer) -> Void,
        httpHandler: TunnelConnectionHandler?
    ) throws(TunnelStackError) {
        guard (1...4).contains(addresses.count) else {
            throw TunnelStackError(description: "a tunnel stack needs one to four addresses, got \(addresses.count)")
        }
        guard configuration.mtu >= 1280, configuration.mtu <= 65535 else {
            throw TunnelStackError(description: "the MTU must be between 1280 and 65535, got \(configuration.mtu)")
        }
        try LwIPCore.start()
        core = StackCore(addresses: addresses, configuration: configuration, group: group, output: output, httpHandler: httpHandler)
        try LwIPCore.locked { () throws(TunnelStackError) in try core.coreStart() }
    }

    /// The addresses the stack answers on.
    public var addresses: [TunnelAddress] { core.addresses }

    /// Takes one IPv6 packet from the tunnel (copied; the caller keeps the buffer).
    /// Anything that is not for the stack is dropped and counted.
    public func input(_ packet: UnsafeRawBufferPointer) {
        let forward = LwIPCore.locked { core.coreInput(packet) }
        if let forward { core.startForward(forward) }
    }

    /// Takes one IPv6 packet from the tunnel.
    public func input(_ packet: [UInt8]) {
        packet.withUnsafeBytes { input($0) }
    }

    /// The counters now.
    public func counters() -> TunnelStackCounters {
        let halfOpen = LwIPCore.locked { core.coreHalfOpen() }
        return core.counters.snapshot(halfOpen: halfOpen)
    }

    /// Resets every connection, closes the local sockets and removes the netif. Packets
    /// given afterwards are dropped. lwIP's thread stays (idle) for other stacks.
    public func shutdown() async {
        let (channels, relays) = LwIPCore.locked { core.coreStop() }
        for relay in relays {
            relay.eventLoop.execute { relay.end(reset: true) }
        }
        LwIPCore.locked { core.coreRemove() }
        for channel in channels {
            try? await channel.close()
        }
    }
}
