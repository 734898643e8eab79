import CLwIPGlue
import Glibc
import NIOCore
import NIOPosix
import Synchronization

/// Forwarded SYNs (connect to 127.0.0.1 first, then let lwIP answer) and accepted
/// connections (the acceptors' channels, forwards' relays). The loop rule of ``StackCore``
/// holds here too.
extension StackCore {
    // MARK: forwarding

    private func channelOptions(_ bootstrap: ClientBootstrap) -> ClientBootstrap {
        bootstrap
            .channelOption(.autoRead, value: false)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelOption(.maxMessagesPerRead, value: 1)
            .channelOption(
                .recvAllocator,
                value: AdaptiveRecvByteBufferAllocator(
                    minimum: 1024, initial: min(16384, configuration.maxLocalRead), maximum: configuration.maxLocalRead))
    }

    /// Connects to 127.0.0.1:<port> for a new forwarded SYN; then lets lwIP answer it.
    func startForward(_ flow: TunnelFlow) {
        let loop = eventLoop
        let address: SocketAddress
        do {
            address = try SocketAddress(ipAddress: "127.0.0.1", port: Int(flow.localPort))
        } catch {
            forwardConnected(flow, .failure(error))
            return
        }
        channelOptions(ClientBootstrap(group: loop))
            .connectTimeout(configuration.connectTimeout)
            .channelInitializer { channel in
                // From the start: what the service sends before the tunnel handshake ends
                // (and its EOF) waits there for the relay.
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(TunnelRelayHandler()) }
            }
            .connect(to: address)
            .whenComplete { result in self.forwardConnected(flow, result) }
    }

    private func forwardConnected(_ flow: TunnelFlow, _ result: Result<any Channel, any Error>) {
        switch result {
        case .success(let channel):
            // On the channel's loop (the connect future's): the handler the initializer added.
            guard let handler = try? channel.pipeline.syncOperations.handler(type: TunnelRelayHandler.self) else {
                forwardConnected(flow, .failure(ChannelError.ioOnClosedChannel))
                channel.close(promise: nil)
                return
            }
            let bound = NIOLoopBound(handler, eventLoop: channel.eventLoop)
            let kept: Bool = LwIPCore.confined {
                guard let netif, !stopping, var handshake = handshakes[flow], handshake.channel == nil else { return false }
                connecting -= 1
                guard coreAcquireListener(flow.localPort) else {
                    handshakes[flow] = nil
                    counters.refusedOther.increment()
                    coreSendReset(handshake.segment, local: flow.local, remote: flow.remote)
                    return false
                }
                handshake.channel = channel
                handshake.handler = bound
                handshake.timer = channel.eventLoop.scheduleTask(in: configuration.handshakeTimeout) {
                    self.handshakeExpired(flow)
                }
                handshakes[flow] = handshake
                // The SYN goes to lwIP now that its listener is there: SYN-ACK.
                handshake.syn.withUnsafeBytes { pass($0, to: netif) }
                return true
            }
            if !kept { channel.close(promise: nil) }
        case .failure(let error):
            LwIPCore.confined {
                guard let handshake = handshakes[flow], handshake.channel == nil else { return }
                handshakes[flow] = nil
                connecting -= 1
                if let error = error as? ChannelError, case .connectTimeout = error {
                    counters.refusedConnectTimeout.increment()
                } else if let error = error as? IOError, error.errnoCode == ECONNREFUSED {
                    counters.refusedNoListener.increment()
                } else {
                    counters.refusedOther.increment()
                }
                if !stopping { coreSendReset(handshake.segment, local: flow.local, remote: flow.remote) }
            }
        }
    }

    private func handshakeExpired(_ flow: TunnelFlow) {
        let channel: (any Channel)? = LwIPCore.confined {
            guard let netif, let handshake = handshakes[flow], let channel = handshake.channel else { return nil }
            handshakes[flow] = nil
            coreReleaseListener(flow.localPort)
            var cFlow = flow.cFlow
            tl_flow_abort_half_open(netif, &cFlow)
            counters.handshakeTimeouts.increment()
            halfOpenSeen.store(coreHalfOpen(), ordering: .relaxed)
            return channel
        }
        channel?.close(promise: nil)
    }

    private func coreAcquireListener(_ port: UInt16) -> Bool {
        if var entry = forwardListeners[port] {
            entry.users += 1
            forwardListeners[port] = entry
            return true
        }
        guard let netif else { return false }
        var pcbs: [OpaquePointer] = []
        for address in addresses {
            guard let listener = tl_listen(netif, address.bytes, port) else {
                pcbs.forEach { tl_listen_close($0) }
                return false
            }
            pcbs.append(listener)
        }
        forwardListeners[port] = (pcbs, 1)
        return true
    }

    private func coreReleaseListener(_ port: UInt16) {
        guard var entry = forwardListeners[port] else { return }
        entry.users -= 1
        if entry.users > 0 {
            forwardListeners[port] = entry
        } else {
            forwardListeners[port] = nil
            entry.pcbs.forEach { tl_listen_close($0) }
        }
    }

    // MARK: accepting

    /// lwIP completed a handshake on one of our listeners (lwIP callback).
    func accept(_ pcb: OpaquePointer, _ flow: TunnelFlow) -> Bool {
        LwIPCore.assertConfined()
        guard !stopping else { return false }
        defer { halfOpenSeen.store(coreHalfOpen(), ordering: .relaxed) }
        coreKeepAlive(pcb, port: flow.localPort)
        if let acceptor = acceptors[flow.localPort] {
            return coreAcceptChannel(pcb, flow, acceptor)
        }
        guard let handshake = handshakes[flow], let channel = handshake.channel, let handler = handshake.handler else { return false }
        handshakes[flow] = nil
        handshake.timer?.cancel()
        // Not inside lwIP's call into this listener's accept: closing it frees it.
        eventLoop.execute { LwIPCore.confined { self.coreReleaseListener(flow.localPort) } }
        let relay = TunnelRelay(
            flow: flow, eventLoop: channel.eventLoop, stack: self, counters: counters, idleTimeout: configuration.idleTimeout,
            halfClosedTimeout: configuration.halfClosedTimeout)
        relay.coreAttach(pcb)
        relays[ObjectIdentifier(relay)] = relay
        counters.accepted.increment()
        counters.openConnections.add(1, ordering: .relaxed)
        counters.forwarded.increment()
        channel.eventLoop.execute { handler.value.attach(relay) }
        return true
    }

    /// Keepalive for an accepted connection (``TunnelStackConfiguration/keepAliveIdle``).
    /// lwIP adds idle and every probe's interval in 32 bits of milliseconds and counts probes
    /// in 8: the figures are clamped so that the sum cannot wrap (about 49 days in all).
    private func coreKeepAlive(_ pcb: OpaquePointer, port: UInt16) {
        func milliseconds(_ amount: TimeAmount, limit: Int64) -> Int64 {
            min(max(amount.nanoseconds / 1_000_000, 1), limit)
        }
        let probes = Int64(min(max(configuration.keepAliveProbes, 1), 255))
        let interval = milliseconds(configuration.keepAliveInterval, limit: Int64(UInt32.max) / 2 / probes)
        let idle = milliseconds(
            configuration.keepAliveIdleByPort[port] ?? configuration.keepAliveIdle, limit: Int64(UInt32.max) - interval * probes)
        tl_pcb_keepalive(pcb, UInt32(idle), UInt32(interval), UInt32(probes))
    }

    /// A connection to an acceptor's port: a ``TunnelChannel``, active once the acceptor's
    /// initializer set up its pipeline (bytes that arrive meanwhile wait in it,
    /// unacknowledged).
    private func coreAcceptChannel(_ pcb: OpaquePointer, _ flow: TunnelFlow, _ acceptor: TunnelAcceptor) -> Bool {
        let channel = TunnelChannel(pcb: pcb, flow: flow, stack: self)
        channels[ObjectIdentifier(channel)] = channel
        counters.accepted.increment()
        counters.openConnections.add(1, ordering: .relaxed)
        // Not inside lwIP's accept callback: the initializer may write.
        eventLoop.execute {
            acceptor.initializer(channel).hop(to: self.eventLoop).whenComplete { result in
                switch result {
                case .success: channel.activate()
                case .failure: channel.abort()
                }
            }
        }
        return true
    }

    /// A channel closed (its pcb already released).
    func channelClosed(_ channel: TunnelChannel) {
        if channels.removeValue(forKey: ObjectIdentifier(channel)) != nil {
            counters.openConnections.subtract(1, ordering: .relaxed)
        }
    }

    /// Runs `channel`'s work once lwIP returns (from inside an lwIP callback).
    func deferUntilLwIPReturns(_ channel: TunnelChannel, failed: Bool = false) {
        LwIPCore.timers.defer(channel, failed: failed)
    }

    /// A relay ended (its pcb already released).
    func coreRelayEnded(_ relay: TunnelRelay) {
        LwIPCore.assertConfined()
        if relays.removeValue(forKey: ObjectIdentifier(relay)) != nil {
            counters.openConnections.subtract(1, ordering: .relaxed)
        }
    }
}
