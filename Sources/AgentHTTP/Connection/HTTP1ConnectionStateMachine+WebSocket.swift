import HTTPTypes

/// The WebSocket handshake's admission and the upgraded connection's events; write and read flow.
extension HTTP1ConnectionStateMachine {
    /// The route's check and the WebSocket budget decided on the handshake of
    /// ``Action/admitWebSocket``.
    mutating func webSocketAdmission(_ admission: WebSocketAdmission, route: RouteInfo, now: C.Instant) -> Actions {
        var actions = Actions()
        guard case .upgrading(var upgrading) = state else { return actions }
        switch admission {
        case .admitted(prepare: true):
            upgrading.preparing = true
            state = .upgrading(upgrading)
            actions.append(.prepareWebSocket)
        case .admitted(prepare: false):
            upgrading.forwarded.handshake = true
            forward(upgrading.forwarded, route: route, chunked: false, wantsContinue: upgrading.continuePending, outstanding: 0, now: now, &actions)
        case .checkFailed:
            upgrading.forwarded.rewrite.insert(.stripUpgrade)
            upgrading.forwarded.handshakeRefusal = .route
            forward(upgrading.forwarded, route: route, chunked: false, wantsContinue: upgrading.continuePending, outstanding: 0, now: now, &actions)
        case .noSlot:
            refuse(
                ConnectionRefusal(
                    status: .serviceUnavailable,
                    body: APIErrorBody(
                        message: "Too many WebSocket connections.",
                        detail: "At most \(configuration.maxWebSockets) WebSockets may be open at once; try again when one has closed."),
                    headers: [.init(name: "Retry-After", value: "1")]),
                outstanding: 0, now: now, &actions)
        }
        return actions
    }

    /// The route's `prepare` ended (after ``Action/prepareWebSocket``): the handshake goes on,
    /// or becomes a plain request for the route's twin. The handler then replays the parts
    /// it held, through the events as usual.
    mutating func webSocketPrepared(_ admitted: Bool, route: RouteInfo, now: C.Instant) -> Actions {
        var actions = Actions()
        guard case .upgrading(var upgrading) = state, upgrading.preparing else { return actions }
        if admitted {
            upgrading.forwarded.handshake = true
        } else {
            actions.append(.releaseWebSocketSlot)
            upgrading.forwarded.rewrite.insert(.stripUpgrade)
            upgrading.forwarded.handshakeRefusal = .route
        }
        forward(upgrading.forwarded, route: route, chunked: false, wantsContinue: upgrading.continuePending, outstanding: 0, now: now, &actions)
        return actions
    }

    /// The 101 is on the wire (the upgraded pipeline is set up): pings may go out.
    mutating func webSocketAnswered(now: C.Instant) -> Actions {
        var actions = Actions()
        guard case .webSocket(var watch) = state, !watch.answered else { return actions }
        watch.answered = true
        state = .webSocket(watch)
        Self.arm(&deadlines.ping, at: now.advanced(by: configuration.webSocketPingInterval), .webSocketPing, now: now, &actions)
        return actions
    }

    /// A client frame without the mask bit (RFC 6455 §5.1): close 1002 and disconnect.
    mutating func webSocketUnmasked() -> Actions {
        var actions = Actions()
        guard case .webSocket = state else { return actions }
        state = .closing
        deadlines.ping.at = nil
        actions.append(.sendClose(code: 1002))
        actions.append(.closeAfterWrites)
        return actions
    }

    /// A WebSocket message broke a bound (``WebSocketMessageGuard``): the close frame with
    /// `code`, then a graceful close.
    mutating func webSocketViolation(code: UInt16, now: C.Instant) -> Actions {
        var actions = Actions()
        guard case .webSocket = state else { return actions }
        deadlines.ping.at = nil
        actions.append(.sendClose(code: code))
        closeGracefully(now: now, &actions)
        return actions
    }

    // MARK: Flow

    /// A write waits for the socket to take data (the channel is not writable).
    mutating func writeBlocked(now: C.Instant) -> Actions {
        var actions = Actions()
        Self.arm(&deadlines.stall, at: now.advanced(by: configuration.writeStallTimeout), .writeStall, now: now, &actions)
        return actions
    }

    /// The socket takes data again.
    mutating func writeUnblocked() {
        deadlines.stall.at = nil
    }

    /// The streamed body's reader has enough buffered (true) or wants more (false).
    mutating func bodyBackPressure(stop: Bool) -> Actions {
        var actions = Actions()
        let wasPaused = pausedForBody || pausedForPipeline
        pausedForBody = stop
        readsChanged(wasPaused: wasPaused, &actions)
        return actions
    }
}
