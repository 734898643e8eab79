import NIOCore
import Synchronization

/// UDP to the stack's addresses, relayed to the workspace's loopback as Coder does: each flow
/// (peer address:port → agent address:port) gets a ``TunnelUDPFlow``, a local socket bound to
/// 127.0.0.1:<peer's port> (another if taken) exchanging datagrams with 127.0.0.1:<agent
/// port>. IPv4 loopback only, no reserved ports.
///
/// Why in Swift, before lwIP: UDP needs no state machine, so parsing the header, checking
/// its checksum and building replies takes a few lines; lwIP's raw UDP API would need a pcb
/// per local port from a fixed pool (MEMP_NUM_UDP_PCB, set by Debian's build, not ours),
/// a C callback path and pbufs, for nothing gained.
///
/// `@unchecked Sendable`: the mutable state (`flows`, `stopping`) is read and written only on
/// the stack's loop (``eventLoop``, lwIP's: every entry point asserts it); the rest is
/// immutable and Sendable.
final class TunnelUDPForwarder: @unchecked Sendable {
    let configuration: TunnelStackConfiguration
    let counters: TunnelCounters
    let eventLoop: any EventLoop
    private let output: @Sendable (UnsafeRawBufferPointer) -> Void
    /// At most ``TunnelStackConfiguration/maxUDPFlows``.
    private var flows: [TunnelFlow: TunnelUDPFlow] = [:]
    private var stopping = false

    /// The largest payload one packet of the tunnel's MTU carries (1232 for 1280).
    var maxPayload: Int { configuration.mtu - TunnelPacket.headerLength - TunnelPacket.udpHeaderLength }

    init(
        configuration: TunnelStackConfiguration, counters: TunnelCounters, eventLoop: any EventLoop,
        output: @escaping @Sendable (UnsafeRawBufferPointer) -> Void
    ) {
        self.configuration = configuration
        self.counters = counters
        self.eventLoop = eventLoop
        self.output = output
    }

    /// A checked datagram from a peer (`packet` is the whole IPv6 packet): to its flow, which
    /// is opened if new and within the bound.
    func receive(_ packet: TunnelPacket, _ datagram: TunnelPacket.UDPDatagram, _ bytes: UnsafeRawBufferPointer) {
        eventLoop.assertInEventLoop()
        guard !stopping, configuration.forwardToLoopback, datagram.destinationPort != 0 else {
            drop()
            return
        }
        let key = TunnelFlow(
            remote: packet.source, remotePort: datagram.sourcePort, local: packet.destination, localPort: datagram.destinationPort)
        let flow: TunnelUDPFlow
        if let existing = flows[key] {
            flow = existing
        } else {
            guard flows.count < configuration.maxUDPFlows else {
                counters.udpFlowsRefused.increment()
                drop()
                return
            }
            flow = TunnelUDPFlow(flow: key, forwarder: self)
            flows[key] = flow
            counters.udpFlowsOpen.add(1, ordering: .relaxed)
            counters.udpFlowsOpened.increment()
            flow.start()
        }
        flow.fromPeer(UnsafeRawBufferPointer(rebasing: bytes[datagram.payload]))
    }

    /// A datagram that goes nowhere: counted as dropped by the stack too.
    func drop() {
        counters.udpDatagramsDropped.increment()
        counters.packetsDropped.increment()
    }

    /// Sends a datagram from the local service to the flow's peer.
    func send(_ payload: UnsafeRawBufferPointer, on flow: TunnelFlow) {
        eventLoop.assertInEventLoop()
        guard !stopping else { return }
        guard payload.count <= maxPayload else {
            counters.udpDatagramsDropped.increment()
            return
        }
        let packet = TunnelPacket.udp(from: flow.local, flow.localPort, to: flow.remote, flow.remotePort, payload: payload)
        counters.udpDatagramsOut.increment()
        counters.packetsOut.increment()
        packet.withUnsafeBytes { output($0) }
    }

    /// A flow ended: its slot is free.
    func ended(_ flow: TunnelUDPFlow) {
        eventLoop.assertInEventLoop()
        guard let current = flows[flow.flow], current === flow else { return }
        flows[flow.flow] = nil
        counters.udpFlowsOpen.subtract(1, ordering: .relaxed)
    }

    /// Ends the flows idle past their timeout by ``TunnelStackConfiguration/clock`` now
    /// (each flow's timer does this on its own; tests with an injected clock call it).
    func expireIdle() {
        eventLoop.assertInEventLoop()
        for flow in Array(flows.values) { flow.checkIdle() }
    }

    /// Ends every flow and takes no more; returns the local channels to close.
    func stop() -> [any Channel] {
        eventLoop.assertInEventLoop()
        stopping = true
        let ended = Array(flows.values)
        return ended.compactMap { $0.stop() }
    }
}
