/// Firing one peer's due timers (wireguard-go's expired* handlers).
extension PeerState {
    /// Fires every timer due at `now`, each at most once.
    mutating func tick<S: WireGuardSink>(now: WireGuardInstant, ctx: inout DeviceContext, sink: inout S) {
        if let due = timers.retransmitHandshake, due <= now {
            timers.retransmitHandshake = nil
            if timers.handshakeAttempts > WireGuardTimers.maxHandshakeAttempts {
                // Retries ran out (about 90 s): give up on the waiting packets.
                timers.sendKeepalive = nil
                flushQueue(counters: &ctx.counters)
                if timers.zeroKeyMaterial == nil {
                    timers.zeroKeyMaterial = now.adding(nanoseconds: WireGuardTimers.zeroKeysAfter)
                }
            } else {
                timers.handshakeAttempts += 1
                sendInitiation(isRetry: true, now: now, ctx: &ctx, sink: &sink)
            }
        }
        if let due = timers.sendKeepalive, due <= now {
            timers.sendKeepalive = nil
            sendKeepalive(now: now, ctx: &ctx, sink: &sink)
            if timers.needAnotherKeepalive {
                timers.needAnotherKeepalive = false
                timers.sendKeepalive = now.adding(nanoseconds: WireGuardTimers.keepaliveTimeout)
            }
        }
        if let due = timers.newHandshake, due <= now {
            // Data went out and nothing came back for 15 s.
            timers.newHandshake = nil
            sendInitiation(isRetry: false, now: now, ctx: &ctx, sink: &sink)
        }
        if let due = timers.zeroKeyMaterial, due <= now {
            timers.zeroKeyMaterial = nil
            zeroAndFlushAll(ctx: &ctx)
        }
        if let due = timers.persistentKeepalive, due <= now {
            timers.persistentKeepalive = nil
            if configuration.persistentKeepaliveSeconds > 0 { sendKeepalive(now: now, ctx: &ctx, sink: &sink) }
        }
    }
}
