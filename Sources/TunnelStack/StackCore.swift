import CLwIPGlue
import Glibc
import NIOCore
import NIOPosix
import Synchronization

/// The state of one ``TunnelStack`` behind its public face: its netif, listeners,
/// handshakes, channels and relays, and the decisions on incoming SYNs.
///
/// Connections (forwards, accepting) are in `StackCore+Connections.swift`.
///
/// `@unchecked Sendable`: every mutable property is read and written only on lwIP's loop
/// (``eventLoop``; methods named `core…` are entered there, inside
/// ``LwIPCore/confined(_:)`` or from an lwIP callback, and check it with
/// ``LwIPCore/assertConfined()``); the rest is immutable and Sendable.
final class StackCore: @unchecked Sendable {
    let configuration: TunnelStackConfiguration
    let addresses: [TunnelAddress]
    let counters = TunnelCounters()
    /// lwIP's loop: every call into lwIP, every callback, the forwards' local sockets.
    let eventLoop: any EventLoop
    private let output: @Sendable (UnsafeRawBufferPointer) -> Void
    /// Ports served by a channel initializer (the HTTP API on 4).
    let acceptors: [UInt16: TunnelAcceptor]
    /// Half-open connections as of the last SYN, RST or accepted handshake (for
    /// ``TunnelStack/counters()`` off the loop).
    let halfOpenSeen = Atomic<Int>(0)

    /// A forwarded SYN: connecting to 127.0.0.1 (`channel` nil), then waiting for the
    /// peer's final ACK (the SYN was handed to lwIP's listener). `handler` holds what the
    /// local socket delivers meanwhile.
    struct Handshake {
        var segment: TunnelPacket.TCPSegment
        var syn: [UInt8]
        var channel: (any Channel)?
        var handler: NIOLoopBound<TunnelRelayHandler>?
        var timer: Scheduled<Void>?
    }

    var netif: OpaquePointer?
    private var acceptorListeners: [OpaquePointer] = []
    /// Listeners of forwarded ports, open while a handshake to that port is in progress.
    var forwardListeners: [UInt16: (pcbs: [OpaquePointer], users: Int)] = [:]
    var handshakes: [TunnelFlow: Handshake] = [:]
    /// Handshakes still connecting locally (no lwIP pcb yet).
    var connecting = 0
    var relays: [ObjectIdentifier: TunnelRelay] = [:]
    /// Accepted connections served as channels, until they close.
    var channels: [ObjectIdentifier: TunnelChannel] = [:]
    var stopping = false
    /// When each open connection last got a challenge ACK.
    var challengeAcks: ChallengeAckLimiter
    /// UDP flows (they need nothing of lwIP).
    let udp: TunnelUDPForwarder

    init(
        addresses: [TunnelAddress], configuration: TunnelStackConfiguration, eventLoop: any EventLoop,
        output: @escaping @Sendable (UnsafeRawBufferPointer) -> Void, acceptors: [UInt16: TunnelAcceptor]
    ) {
        self.addresses = addresses
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.output = output
        self.acceptors = acceptors
        challengeAcks = ChallengeAckLimiter(interval: configuration.challengeAckInterval, capacity: configuration.maxConnections)
        udp = TunnelUDPForwarder(configuration: configuration, counters: counters, eventLoop: eventLoop, output: output)
    }

    static func from(_ pointer: UnsafeMutableRawPointer) -> StackCore {
        Unmanaged<StackCore>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Adds the netif (it holds a reference to self until ``coreRemove()``) and the
    /// acceptors' listeners.
    func coreStart() throws(TunnelStackError) {
        LwIPCore.assertConfined()
        let bytes = addresses.flatMap(\.bytes)
        let context = Unmanaged.passRetained(self).toOpaque()
        guard let netif = tl_netif_add(context, bytes, Int32(addresses.count), UInt16(configuration.mtu)) else {
            Unmanaged<StackCore>.fromOpaque(context).release()
            throw TunnelStackError(description: "lwIP refused the tunnel interface (or its structures differ from ours)")
        }
        self.netif = netif
        for port in acceptors.keys.sorted() {
            for address in addresses {
                guard let listener = tl_listen(netif, address.bytes, port) else {
                    coreRemove()
                    throw TunnelStackError(description: "lwIP refused to listen on port \(port)")
                }
                acceptorListeners.append(listener)
            }
        }
    }

    // MARK: packets

    /// Sends a packet lwIP (or the stack) made.
    func emit(_ packet: UnsafeRawBufferPointer) {
        counters.packetsOut.increment()
        output(packet)
    }

    /// Decides on one incoming packet and hands it to lwIP when it passes; returns a flow to
    /// connect locally (after the lock is released) for a new forwarded SYN.
    func coreInput(_ bytes: UnsafeRawBufferPointer) -> TunnelFlow? {
        LwIPCore.assertConfined()
        counters.packetsIn.increment()
        guard let netif, !stopping, bytes.count <= configuration.mtu, let packet = TunnelPacket.parse(bytes),
            addresses.contains(packet.destination), !packet.source.isMulticast, !packet.source.isUnspecifiedOrLoopback,
            !addresses.contains(packet.source)
        else {
            counters.packetsDropped.increment()
            return nil
        }
        let wire = UnsafeRawBufferPointer(rebasing: bytes[..<packet.length])
        switch packet.transport {
        case .icmp(type: 128):
            // Echo request: lwIP answers. Other ICMPv6 (neighbour discovery, router
            // advertisements, errors) has no use on a tunnel and would change lwIP's global
            // routing state: dropped.
            pass(wire, to: netif)
        case .tcp(let segment):
            return coreTCP(packet, segment, wire, netif: netif)
        case .udp(let datagram):
            udp.receive(packet, datagram, wire)
        case .malformedUDP:
            udp.drop()
        default:
            counters.packetsDropped.increment()
        }
        return nil
    }

    func pass(_ wire: UnsafeRawBufferPointer, to netif: OpaquePointer) {
        if tl_netif_input(netif, wire.baseAddress?.assumingMemoryBound(to: UInt8.self), wire.count) != 0 {
            counters.packetsDropped.increment()
        }
    }

    private func coreTCP(
        _ packet: TunnelPacket, _ segment: TunnelPacket.TCPSegment, _ wire: UnsafeRawBufferPointer, netif: OpaquePointer
    ) -> TunnelFlow? {
        guard segment.optionsValid else {
            counters.packetsDropped.increment()
            return nil
        }
        // Handshakes begin and end on SYNs and RSTs: the half-open count off the loop follows.
        defer { if segment.syn || segment.rst { halfOpenSeen.store(coreHalfOpen(), ordering: .relaxed) } }
        let flow = TunnelFlow(remote: packet.source, remotePort: segment.sourcePort, local: packet.destination, localPort: segment.destinationPort)
        var cFlow = flow.cFlow
        var state = tl_flow_state()
        let known = tl_flow_lookup(netif, &cFlow, &state) != 0
        if segment.syn {
            // lwIP 2.1.3 takes a SYN in any state (fixed upstream later: it can break its
            // out-of-order queue): only a retransmitted SYN of a handshake reaches it. A SYN
            // on an open connection gets a challenge ACK instead (a peer that restarted and
            // uses its port again resets the old connection with its answer).
            if known {
                if state.state == 3, !segment.ack {
                    pass(wire, to: netif)
                } else if !challengeAcks.allow(flow, now: configuration.clock()) {
                    counters.challengeAcksLimited.increment()
                } else if tl_flow_challenge_ack(netif, &cFlow) != 0 {
                    counters.challengeAcks.increment()
                } else {
                    counters.packetsDropped.increment()
                }
                return nil
            }
            if segment.ack || segment.rst {
                pass(wire, to: netif)  // not ours: lwIP resets it
                return nil
            }
            // The 4-tuple of a connection lwIP holds in TIME_WAIT (the workspace closed
            // first, and the peer reuses its port): a newer SYN ends the TIME_WAIT and opens
            // as any other; lwIP answers an older one from TIME_WAIT, and nothing connects.
            // The same walk keeps TIME_WAIT within its bound.
            switch tl_flow_end_time_wait(netif, &cFlow, segment.sequence, Int32(configuration.maxTimeWait)) {
            case 1:
                counters.timeWaitReused.increment()
            case -1:
                pass(wire, to: netif)
                return nil
            case -2:
                counters.packetsDropped.increment()
                return nil
            default:
                break
            }
            return coreOpen(flow, packet, segment, wire, netif: netif)
        }
        if known, segment.sequenceLength > 0 {
            // Nothing beyond the window reaches lwIP (2.1.3 can overrun its window when it
            // trims such a segment into its out-of-order queue); a 1-byte probe of a closed
            // window is only acknowledged there, so it may pass.
            let end = segment.sequence &+ segment.sequenceLength
            let right = state.rcv_nxt &+ state.rcv_wnd
            let probe = state.rcv_wnd == 0 && segment.sequence == state.rcv_nxt && segment.sequenceLength == 1
            if Int32(bitPattern: end &- right) > 0, !probe {
                counters.packetsDropped.increment()
                return nil
            }
        }
        pass(wire, to: netif)
        if known, segment.payloadLength > 0, segment.sequence != state.rcv_nxt {
            let limit = Int32(configuration.maxOutOfOrderSegments)
            if tl_flow_limit_ooseq(netif, &cFlow, limit) > limit {
                counters.outOfOrderPurges.increment()
            }
        }
        return nil
    }

    /// A SYN for a flow lwIP does not know.
    private func coreOpen(
        _ flow: TunnelFlow, _ packet: TunnelPacket, _ segment: TunnelPacket.TCPSegment, _ wire: UnsafeRawBufferPointer,
        netif: OpaquePointer
    ) -> TunnelFlow? {
        let port = segment.destinationPort
        let accepted = acceptors[port] != nil
        if accepted {
            // Served here: lwIP answers.
        } else if port == configuration.httpPort {
            coreReset(segment, of: packet, counter: counters.refusedOther)
            return nil
        } else if port < configuration.firstForwardedPort {
            coreReset(segment, of: packet, counter: counters.refusedReservedPort)
            return nil
        } else {
            guard configuration.forwardToLoopback else {
                coreReset(segment, of: packet, counter: counters.refusedOther)
                return nil
            }
            if let handshake = handshakes[flow] {
                // Still connecting: a retransmission, dropped. Waiting for the ACK but lwIP
                // lost the half-open pcb: its listener takes the SYN again.
                if handshake.channel != nil { pass(wire, to: netif) } else { counters.packetsDropped.increment() }
                return nil
            }
        }
        let counts = tl_netif_counts(netif)
        let halfOpen = Int(counts.syn_rcvd_low_ports) + handshakes.count
        guard Int(counts.active) + connecting < configuration.maxConnections else {
            coreReset(segment, of: packet, counter: counters.refusedConnectionLimit)
            return nil
        }
        guard halfOpen < configuration.maxHalfOpen else {
            counters.droppedHalfOpenLimit.increment()
            counters.packetsDropped.increment()
            return nil
        }
        if accepted {
            pass(wire, to: netif)
            return nil
        }
        handshakes[flow] = Handshake(segment: segment, syn: Array(wire), channel: nil, handler: nil, timer: nil)
        connecting += 1
        return flow
    }

    private func coreReset(_ segment: TunnelPacket.TCPSegment, of packet: TunnelPacket, counter: borrowing Atomic<UInt64>) {
        counter.increment()
        coreSendReset(segment, local: packet.destination, remote: packet.source)
    }

    func coreSendReset(_ segment: TunnelPacket.TCPSegment, local: TunnelAddress, remote: TunnelAddress) {
        guard !segment.rst else { return }
        TunnelPacket.reset(refusing: segment, from: local, to: remote).withUnsafeBytes { emit($0) }
    }

    // MARK: counters and shutdown

    func coreHalfOpen() -> Int {
        LwIPCore.assertConfined()
        guard let netif else { return 0 }
        return Int(tl_netif_counts(netif).syn_rcvd_low_ports) + handshakes.count
    }

    /// Stops taking connections; resets every connection, ends the UDP flows and returns the
    /// local channels to close and the relays to end.
    func coreStop() -> (channels: [any Channel], relays: [TunnelRelay]) {
        LwIPCore.assertConfined()
        for channel in Array(self.channels.values) { channel.abort() }
        stopping = true
        var channels: [any Channel] = udp.stop()
        for handshake in handshakes.values {
            handshake.timer?.cancel()
            if let channel = handshake.channel { channels.append(channel) }
        }
        handshakes = [:]
        connecting = 0
        let ended = Array(relays.values)
        for relay in ended { relay.coreRelease(reset: true) }
        return (channels, ended)
    }

    /// Closes the listeners and removes the netif (ending whatever lwIP still held of it).
    func coreRemove() {
        LwIPCore.assertConfined()
        acceptorListeners.forEach { tl_listen_close($0) }
        acceptorListeners = []
        forwardListeners.values.forEach { $0.pcbs.forEach { tl_listen_close($0) } }
        forwardListeners = [:]
        guard let netif else { return }
        self.netif = nil
        tl_netif_remove(netif)
        Unmanaged.passUnretained(self).release()
    }
}
