import NIOCore
import NIOPosix
import Synchronization

/// A userspace TCP/UDP/IPv6 stack for the tailnet (lwIP for TCP and echo), with no TUN and
/// no privileges: the owner feeds it the IPv6 packets WireGuard decrypted (``input(_:)``)
/// and sends on what it emits (`output`).
///
/// - Addresses: the agent's /128s (the fd7a:115c:a1e0::/48 and fd60:627a:a42b::/48 ones);
///   packets to anything else, IPv4, and everything but TCP, UDP and ICMPv6 echo are
///   dropped. Echo requests are answered.
/// - UDP to any port N (but 0) → relayed to 127.0.0.1:N, one local socket per flow, bound
///   to 127.0.0.1:<peer's port> when free (see ``TunnelUDPForwarder``): Coder's forwarding,
///   with a bound on flows (``TunnelStackConfiguration/maxUDPFlows``). Malformed datagrams
///   (length field, checksum) are dropped and counted.
/// - TCP by destination port: a port with a ``TunnelAcceptor`` (the HTTP API on
///   ``TunnelStackConfiguration/httpPort``, 4) → each connection is a ``TunnelChannel``
///   given to the acceptor's initializer; ports from
///   ``TunnelStackConfiguration/firstForwardedPort`` (9) up → relayed to 127.0.0.1:<port>,
///   connected before the handshake is answered, so the peer gets RST when nothing listens
///   there; other ports (0–8) → RST at once.
/// - Bounds: see ``TunnelStackConfiguration``; counters: ``counters()``.
///
/// Threads: lwIP runs process-wide on one event loop (``eventLoop``: the first stack's
/// choice, see `LwIPCore`), with no lock and no thread of its own; each stack is one lwIP
/// netif, so several stacks may live in one process (with different addresses). `output`
/// and every channel run on that loop; `output` must neither block nor call back into the
/// stack. ``input(_:)`` on the loop goes straight to lwIP (elsewhere it hops there, with a
/// copy). Call ``shutdown()`` to stop: the netif holds the stack until then.
public final class TunnelStack: Sendable {
    private let core: StackCore

    /// Starts a stack on `addresses` (one to four /128s). Call it on lwIP's loop or off every
    /// event loop (it waits for the loop to add the netif); from a task, ``start(addresses:configuration:eventLoop:output:acceptors:)``
    /// waits without holding a thread.
    /// - Parameters:
    ///   - eventLoop: the loop lwIP is confined to, if this is the process's first stack
    ///     (else the first stack's loop is used: see ``eventLoop``); nil: one of NIO's
    ///     singleton group.
    ///   - output: takes each outgoing IPv6 packet (valid during the call only), on the loop.
    ///   - acceptors: the ports served as channels (the HTTP API on 4); any other port below
    ///     ``TunnelStackConfiguration/firstForwardedPort`` is reset.
    public convenience init(
        addresses: [TunnelAddress], configuration: TunnelStackConfiguration = TunnelStackConfiguration(),
        eventLoop: (any EventLoop)? = nil,
        output: @escaping @Sendable (UnsafeRawBufferPointer) -> Void,
        acceptors: [UInt16: TunnelAcceptor] = [:]
    ) throws(TunnelStackError) {
        let core = try Self.makeCore(addresses: addresses, configuration: configuration, eventLoop: eventLoop, output: output, acceptors: acceptors)
        self.init(core: core)
        let started: Result<Void, TunnelStackError>
        if core.eventLoop.inEventLoop {
            started = Self.startOnLoop(core)
        } else {
            do {
                started = try core.eventLoop.submit { Self.startOnLoop(core) }.wait()
            } catch {
                throw TunnelStackError(description: "lwIP's event loop is not running: \(error)")
            }
        }
        try started.get()
    }

    /// Starts a stack as ``init(addresses:configuration:eventLoop:output:acceptors:)`` does,
    /// awaiting lwIP's loop instead of blocking the caller's thread.
    public static func start(
        addresses: [TunnelAddress], configuration: TunnelStackConfiguration = TunnelStackConfiguration(),
        eventLoop: (any EventLoop)? = nil,
        output: @escaping @Sendable (UnsafeRawBufferPointer) -> Void,
        acceptors: [UInt16: TunnelAcceptor] = [:]
    ) async throws(TunnelStackError) -> TunnelStack {
        let core = try makeCore(addresses: addresses, configuration: configuration, eventLoop: eventLoop, output: output, acceptors: acceptors)
        let stack = TunnelStack(core: core)
        let started: Result<Void, TunnelStackError>
        do {
            started = try await core.eventLoop.submit { startOnLoop(core) }.get()
        } catch {
            throw TunnelStackError(description: "lwIP's event loop is not running: \(error)")
        }
        try started.get()
        return stack
    }

    private init(core: StackCore) {
        self.core = core
    }

    /// Checks the addresses and MTU and binds the stack to lwIP's loop (not yet started).
    private static func makeCore(
        addresses: [TunnelAddress], configuration: TunnelStackConfiguration, eventLoop: (any EventLoop)?,
        output: @escaping @Sendable (UnsafeRawBufferPointer) -> Void, acceptors: [UInt16: TunnelAcceptor]
    ) throws(TunnelStackError) -> StackCore {
        guard (1...4).contains(addresses.count) else {
            throw TunnelStackError(description: "a tunnel stack needs one to four addresses, got \(addresses.count)")
        }
        guard configuration.mtu >= 1280, configuration.mtu <= 65535 else {
            throw TunnelStackError(description: "the MTU must be between 1280 and 65535, got \(configuration.mtu)")
        }
        let loop = try LwIPCore.start(preferred: eventLoop ?? MultiThreadedEventLoopGroup.singleton.next())
        return StackCore(addresses: addresses, configuration: configuration, eventLoop: loop, output: output, acceptors: acceptors)
    }

    /// Adds the netif; on lwIP's loop.
    private static func startOnLoop(_ core: StackCore) -> Result<Void, TunnelStackError> {
        Result { () throws(TunnelStackError) in try LwIPCore.confined { () throws(TunnelStackError) in try core.coreStart() } }
    }

    /// The loop lwIP (and so this stack, its channels and `output`) runs on.
    public var eventLoop: any EventLoop { core.eventLoop }

    /// The addresses the stack answers on.
    public var addresses: [TunnelAddress] { core.addresses }

    /// Takes one IPv6 packet from the tunnel (copied; the caller keeps the buffer).
    /// Anything that is not for the stack is dropped and counted.
    public func input(_ packet: UnsafeRawBufferPointer) {
        if core.eventLoop.inEventLoop {
            inputOnLoop(packet)
        } else {
            let copy = Array(packet)
            core.eventLoop.execute { [self] in copy.withUnsafeBytes { inputOnLoop($0) } }
        }
    }

    /// Takes one IPv6 packet from the tunnel.
    public func input(_ packet: [UInt8]) {
        packet.withUnsafeBytes { input($0) }
    }

    private func inputOnLoop(_ packet: UnsafeRawBufferPointer) {
        let forward = LwIPCore.confined { core.coreInput(packet) }
        if let forward { core.startForward(forward) }
    }

    /// The counters now (half-open connections as of the last handshake event when called
    /// off the loop).
    public func counters() -> TunnelStackCounters {
        let halfOpen = core.eventLoop.inEventLoop ? core.coreHalfOpen() : core.halfOpenSeen.load(ordering: .relaxed)
        return core.counters.snapshot(halfOpen: halfOpen)
    }

    /// Ends the UDP flows idle past their timeout by the configuration's clock now (each
    /// flow's timer does this by itself; for tests with an injected clock).
    func expireIdleUDPFlows() async {
        try? await core.eventLoop.submit { self.core.udp.expireIdle() }.get()
    }

    /// Resets every connection, ends the UDP flows, closes the local sockets and removes the netif. Packets
    /// given afterwards are dropped. lwIP stays (idle) for other stacks.
    public func shutdown() async {
        let core = self.core
        let channels = try? await core.eventLoop.submit {
            LwIPCore.confined {
                let (channels, relays) = core.coreStop()
                for relay in relays { relay.end(reset: true) }
                core.coreRemove()
                return channels
            }
        }.get()
        for channel in channels ?? [] {
            try? await channel.close()
        }
    }
}
