/// Transport messages toward and from one peer, and the sends the protocol makes on its own
/// (initiations, responses, keepalives), with wireguard-go's timer events around each.
extension PeerState {
    /// Sends `packet` now if a session can, else queues it and starts a handshake.
    mutating func send<S: WireGuardSink>(
        _ packet: UnsafeRawBufferPointer, now: WireGuardInstant, ctx: inout DeviceContext, sink: inout S
    ) -> Bool {
        if queue.isEmpty, canSend(now: now) {
            encryptAndSend(packet, now: now, ctx: &ctx, sink: &sink)
            keepKeyFreshSending(now: now, ctx: &ctx, sink: &sink)
            return true
        }
        stage(packet, limit: ctx.configuration.queueLimit, counters: &ctx.counters)
        sendStaged(now: now, ctx: &ctx, sink: &sink)
        return queue.isEmpty
    }

    /// Sends every queued packet if a session can; else starts a handshake.
    mutating func sendStaged<S: WireGuardSink>(now: WireGuardInstant, ctx: inout DeviceContext, sink: inout S) {
        guard canSend(now: now) else {
            sendInitiation(isRetry: false, now: now, ctx: &ctx, sink: &sink)
            return
        }
        var pending: [[UInt8]] = []
        swap(&pending, &queue)
        for packet in pending {
            packet.withUnsafeBytes { encryptAndSend($0, now: now, ctx: &ctx, sink: &sink) }
        }
        pending.removeAll(keepingCapacity: true)
        if queue.isEmpty { swap(&pending, &queue) }
        keepKeyFreshSending(now: now, ctx: &ctx, sink: &sink)
    }

    /// Encrypts one packet (empty = keepalive) on the current session into the device's
    /// scratch buffer and hands it to the sink. The caller checked `canSend`.
    mutating func encryptAndSend<S: WireGuardSink>(
        _ packet: UnsafeRawBufferPointer, now: WireGuardInstant, ctx: inout DeviceContext, sink: inout S
    ) {
        guard let current = keypairs.current else { return }
        let counter = current.sendCounter
        keypairs.current!.sendCounter = counter + 1
        let padded = packet.isEmpty ? 0 : WireGuardMessage.paddedSize(packet.count, mtu: ctx.configuration.mtu)
        let total = WireGuardMessage.Transport.headerSize + padded + 16
        var buffer: [UInt8] = []
        swap(&buffer, &ctx.scratch)
        precondition(buffer.count >= total, "scratch buffer in use or too small")
        let peerKey = key
        buffer.withUnsafeMutableBytes { out in
            typealias L = WireGuardMessage.Transport
            WireGuardMessage.writeU32(out, 0, WireGuardMessage.transportType)
            WireGuardMessage.writeU32(out, L.receiver, current.remoteIndex)
            out.storeBytes(of: counter.littleEndian, toByteOffset: L.counter, as: UInt64.self)
            let body = out.baseAddress! + L.headerSize
            if !packet.isEmpty { body.copyMemory(from: packet.baseAddress!, byteCount: packet.count) }
            if padded > packet.count { (body + packet.count).initializeMemory(as: UInt8.self, repeating: 0, count: padded - packet.count) }
            NoiseCrypto.seal(
                key: current.sendKey, counter: counter, plain: UnsafeRawBufferPointer(start: body, count: padded),
                ad: UnsafeRawBufferPointer(start: nil, count: 0), into: UnsafeMutableRawBufferPointer(start: body, count: padded + 16))
            sink.send(UnsafeRawBufferPointer(start: out.baseAddress, count: total), to: peerKey)
        }
        swap(&buffer, &ctx.scratch)
        ctx.counters.transportPacketsSent &+= 1
        ctx.counters.transportBytesSent &+= UInt64(total)
        sentBytes &+= UInt64(total)
        anyAuthenticatedPacketTraversal(now: now)
        timers.sendKeepalive = nil
        if packet.isEmpty {
            ctx.counters.keepalivesSent &+= 1
        } else if timers.newHandshake == nil {
            timers.newHandshake = now.adding(nanoseconds: WireGuardTimers.keepaliveTimeout + WireGuardTimers.rekeyTimeout + ctx.jitter())
        }
    }

    /// Receives a transport message on the session with local index `index`.
    mutating func receiveTransport<S: WireGuardSink>(
        _ message: UnsafeRawBufferPointer, index: UInt32, now: WireGuardInstant, ctx: inout DeviceContext, sink: inout S
    ) -> WireGuardReceiveResult {
        typealias L = WireGuardMessage.Transport
        guard let slot = keypairs.slot(of: index) else { return ctx.dropped(.noSession) }
        let counter = UInt64(littleEndian: message.loadUnaligned(fromByteOffset: L.counter, as: UInt64.self))
        let receiveKey: Key32
        let usable: Bool
        switch slot {
        case .current: (receiveKey, usable) = (keypairs.current!.receiveKey, keypairs.current!.canReceive(now: now))
        case .next: (receiveKey, usable) = (keypairs.next!.receiveKey, keypairs.next!.canReceive(now: now))
        case .previous: (receiveKey, usable) = (keypairs.previous!.receiveKey, keypairs.previous!.canReceive(now: now))
        }
        guard usable, counter < WireGuardTimers.rejectAfterMessages else { return ctx.dropped(.noSession) }
        let plainLength = message.count - L.minimumSize
        var buffer: [UInt8] = []
        swap(&buffer, &ctx.scratch)
        precondition(buffer.count >= plainLength, "scratch buffer in use or too small")
        var authenticated = false
        let result = buffer.withUnsafeMutableBytes { out -> WireGuardReceiveResult in
            let plain = UnsafeMutableRawBufferPointer(rebasing: out[0..<plainLength])
            let cipher = UnsafeRawBufferPointer(rebasing: message[L.headerSize...])
            guard NoiseCrypto.open(key: receiveKey, counter: counter, cipher: cipher, ad: UnsafeRawBufferPointer(start: nil, count: 0), into: plain)
            else { return ctx.dropped(.authenticationFailed) }
            let fresh: Bool
            switch slot {
            case .current: fresh = keypairs.current!.replay.accept(counter, limit: WireGuardTimers.rejectAfterMessages)
            case .next: fresh = keypairs.next!.replay.accept(counter, limit: WireGuardTimers.rejectAfterMessages)
            case .previous: fresh = keypairs.previous!.replay.accept(counter, limit: WireGuardTimers.rejectAfterMessages)
            }
            guard fresh else { return ctx.dropped(.replay) }
            authenticated = true
            ctx.counters.transportPacketsReceived &+= 1
            ctx.counters.transportBytesReceived &+= UInt64(message.count)
            receivedBytes &+= UInt64(message.count)
            anyAuthenticatedPacketTraversal(now: now)
            timers.newHandshake = nil
            guard plainLength > 0 else {
                ctx.counters.keepalivesReceived &+= 1
                return .keepalive(key)
            }
            if timers.sendKeepalive == nil {
                timers.sendKeepalive = now.adding(nanoseconds: WireGuardTimers.keepaliveTimeout)
            } else {
                timers.needAnotherKeepalive = true
            }
            guard let view = IPPacketView(UnsafeRawBufferPointer(plain)) else { return ctx.dropped(.malformed) }
            guard ctx.allowedIPs.lookup(view.source) == key else { return ctx.dropped(.sourceNotAllowed) }
            ctx.counters.packetsDelivered &+= 1
            ctx.counters.bytesDelivered &+= UInt64(view.totalLength)
            sink.deliver(UnsafeRawBufferPointer(rebasing: plain[0..<view.totalLength]), from: key)
            return .packet(key, length: view.totalLength)
        }
        swap(&buffer, &ctx.scratch)
        if authenticated { afterTransportReceived(confirmedNext: slot == .next, now: now, ctx: &ctx, sink: &sink) }
        return result
    }

    /// After a transport message authenticated (scratch buffer back in place): confirms a
    /// responder's session and keeps the keys fresh.
    mutating func afterTransportReceived<S: WireGuardSink>(
        confirmedNext: Bool, now: WireGuardInstant, ctx: inout DeviceContext, sink: inout S
    ) {
        if confirmedNext {
            confirmNext(ctx: &ctx)
            ctx.counters.handshakesConfirmedAsResponder &+= 1
            handshakeComplete(now: now)
            sendStaged(now: now, ctx: &ctx, sink: &sink)
        }
        keepKeyFreshReceiving(now: now, ctx: &ctx, sink: &sink)
    }

    /// Sends an initiation unless one went out less than RekeyTimeout ago.
    mutating func sendInitiation<S: WireGuardSink>(isRetry: Bool, now: WireGuardInstant, ctx: inout DeviceContext, sink: inout S) {
        if !isRetry { timers.handshakeAttempts = 0 }
        if let last = lastHandshakeSent, now.since(last) < WireGuardTimers.rekeyTimeout { return }
        lastHandshakeSent = now
        guard let message = createInitiation(now: now, ctx: &ctx) else { return }
        anyAuthenticatedPacketTraversal(now: now)
        timers.sendKeepalive = nil
        let peerKey = key
        message.withUnsafeBytes { sink.send($0, to: peerKey) }
        ctx.counters.initiationsSent &+= 1
        timers.retransmitHandshake = now.adding(nanoseconds: WireGuardTimers.rekeyTimeout + ctx.jitter())
    }

    /// Answers the consumed initiation and derives the (unconfirmed) session.
    mutating func sendResponse<S: WireGuardSink>(now: WireGuardInstant, ctx: inout DeviceContext, sink: inout S) -> Bool {
        lastHandshakeSent = now
        guard let message = createResponse(now: now, ctx: &ctx), beginSymmetricSession(now: now, ctx: &ctx) else { return false }
        timers.zeroKeyMaterial = now.adding(nanoseconds: WireGuardTimers.zeroKeysAfter)
        anyAuthenticatedPacketTraversal(now: now)
        timers.sendKeepalive = nil
        let peerKey = key
        message.withUnsafeBytes { sink.send($0, to: peerKey) }
        ctx.counters.initiationsAnswered &+= 1
        return true
    }

    /// A keepalive: queued packets go first (they serve as one); without a session, a handshake.
    mutating func sendKeepalive<S: WireGuardSink>(now: WireGuardInstant, ctx: inout DeviceContext, sink: inout S) {
        if !queue.isEmpty || !canSend(now: now) {
            sendStaged(now: now, ctx: &ctx, sink: &sink)
            return
        }
        encryptAndSend(UnsafeRawBufferPointer(start: nil, count: 0), now: now, ctx: &ctx, sink: &sink)
    }

    /// Re-keys when the session is worn (messages) or, as initiator, old (120 s).
    mutating func keepKeyFreshSending<S: WireGuardSink>(now: WireGuardInstant, ctx: inout DeviceContext, sink: inout S) {
        guard let current = keypairs.current else { return }
        if current.sendCounter > WireGuardTimers.rekeyAfterMessages
            || (current.isInitiator && now.since(current.created) > WireGuardTimers.rekeyAfterTime)
        {
            sendInitiation(isRetry: false, now: now, ctx: &ctx, sink: &sink)
        }
    }

    /// As initiator, re-keys once when receiving on a session close to rejection (165 s).
    mutating func keepKeyFreshReceiving<S: WireGuardSink>(now: WireGuardInstant, ctx: inout DeviceContext, sink: inout S) {
        guard !timers.sentLastMinuteHandshake, let current = keypairs.current, current.isInitiator else { return }
        let limit = WireGuardTimers.rejectAfterTime - WireGuardTimers.keepaliveTimeout - WireGuardTimers.rekeyTimeout
        if now.since(current.created) > limit {
            timers.sentLastMinuteHandshake = true
            sendInitiation(isRetry: false, now: now, ctx: &ctx, sink: &sink)
        }
    }

    /// Re-arms the persistent keepalive around any authenticated packet.
    mutating func anyAuthenticatedPacketTraversal(now: WireGuardInstant) {
        let interval = configuration.persistentKeepaliveSeconds
        if interval > 0 { timers.persistentKeepalive = now.adding(nanoseconds: interval * WireGuardTimers.second) }
    }

    /// A handshake finished: stop retrying.
    mutating func handshakeComplete(now: WireGuardInstant) {
        timers.retransmitHandshake = nil
        timers.handshakeAttempts = 0
        timers.sentLastMinuteHandshake = false
        lastHandshake = now
    }
}
