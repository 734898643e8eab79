import NIOCore
import NIOWebSocket

/// One upgraded connection's WebSocket session (RFC 6455, server side) as events in and
/// actions out, with no I/O: ``WebSocketSession`` feeds it the client's frames, the route's
/// writes, closes and return, the close timer and the end of input, and carries out what it
/// answers.
///
/// - A ping is answered with a pong carrying its payload (not once our close went out).
/// - The close handshake: a client's close is answered with 1000 (1002 for a code RFC 6455
///   does not allow on the wire, or a 1-byte payload), and the route's inbound ends; our
///   own close (the route's, or 1000 / 1011 / the thrown code when the route returns) is
///   followed by at most ``Configuration/closeTimeout`` for the client's, then the channel
///   closes. Every close frame we send also half-closes our output.
/// - Protocol errors close with 1002: reserved bits (no extension is negotiated), reserved
///   opcodes, a control frame fragmented or over 125 bytes, a continuation with no message
///   to continue, a new message inside a fragmented one.
///
/// Message sizes and UTF-8 are the pipeline's (``WebSocketMessageGuard``, before any frame
/// gets here); pings for idle peers are the connection core's (on raw bytes).
struct WebSocketSessionStateMachine<C: Clock> where C.Duration == Duration {
    struct Configuration: Sendable {
        /// How long after our close frame the client has to send its own.
        var closeTimeout: Duration = .seconds(2)
    }

    enum State: Equatable {
        case open
        /// A close frame went out (`awaitingClose`: ours, the client's is still owed; else
        /// our answer to the client's). The channel closes at `deadline` at the latest.
        case closing(deadline: C.Instant, awaitingClose: Bool)
        case closed
    }

    enum Action: Equatable {
        /// A data frame for the route's inbound.
        case deliver(WebSocketDataFrame)
        case sendPong(ByteBuffer)
        /// A close frame, then our output half-closed.
        case sendClose(WebSocketErrorCode, reason: String?)
        /// The route's inbound ends (after what was delivered).
        case finishInbound
        /// Call ``closeTimerFired(now:)`` after this long.
        case armCloseTimer(Duration)
        case closeChannel
    }

    let configuration: Configuration
    private(set) var state: State = .open
    /// A text or binary message began and its last fragment has not come.
    private var fragmented = false
    private var inboundFinished = false
    private var inputEnded = false

    init(configuration: Configuration = .init()) {
        self.configuration = configuration
    }

    // MARK: Client frames

    /// A frame from the client, `data` unmasked; `reservedBits` true if any RSV bit is set.
    mutating func received(opcode: WebSocketOpcode, fin: Bool, reservedBits: Bool, data: ByteBuffer, now: C.Instant) -> [Action] {
        if state == .closed { return [] }
        if reservedBits { return protocolError(now: now) }
        switch opcode {
        case .ping, .pong, .connectionClose:
            guard fin, data.readableBytes <= 125 else { return protocolError(now: now) }
            if opcode == .ping {
                return state == .open ? [.sendPong(data)] : []
            }
            if opcode == .connectionClose { return receivedClose(data, now: now) }
            return []
        case .text, .binary:
            guard !fragmented else { return protocolError(now: now) }
            fragmented = !fin
            return deliver(WebSocketDataFrame(opcode: opcode == .text ? .text : .binary, data: data, fin: fin))
        case .continuation:
            guard fragmented else { return protocolError(now: now) }
            fragmented = !fin
            return deliver(WebSocketDataFrame(opcode: .continuation, data: data, fin: fin))
        default:
            return protocolError(now: now)
        }
    }

    /// The client sent no more (its FIN, or the channel closed).
    mutating func inputClosed() -> [Action] {
        inputEnded = true
        var actions = finishInbound()
        switch state {
        case .open:
            break
        case .closing:
            state = .closed
            actions.append(.closeChannel)
        case .closed:
            return []
        }
        return actions
    }

    // MARK: The route

    /// Whether the route may write a message now (not once a close frame went out).
    var mayWrite: Bool { state == .open }

    /// The route closes the session with `code`; nothing if a close already went out.
    mutating func closeRequested(_ code: WebSocketErrorCode, reason: String?, now: C.Instant) -> [Action] {
        guard state == .open else { return [] }
        return sendOwnClose(code, reason: reason, now: now)
    }

    /// The route's handler returned (`code`: 1000, or 1011 / the code of a thrown
    /// ``WebSocketCloseError``). The session ends once the close handshake does.
    mutating func handlerEnded(_ code: WebSocketErrorCode, now: C.Instant) -> [Action] {
        // Nobody reads what the client still sends.
        let actions = finishInbound()
        switch state {
        case .open:
            return actions + sendOwnClose(code, reason: nil, now: now)
        case .closing(_, awaitingClose: false):
            // The client's close was answered: nothing is left to wait for.
            state = .closed
            return actions + [.closeChannel]
        case .closing, .closed:
            return actions
        }
    }

    // MARK: Timer

    /// The close timer came due: a client that owes its close frame (or its FIN after our
    /// answer) is disconnected.
    mutating func closeTimerFired(now: C.Instant) -> [Action] {
        guard case .closing(let deadline, _) = state, now >= deadline else { return [] }
        state = .closed
        return finishInbound() + [.closeChannel]
    }

    // MARK: Internals

    private mutating func deliver(_ frame: WebSocketDataFrame) -> [Action] {
        inboundFinished ? [] : [.deliver(frame)]
    }

    private mutating func finishInbound() -> [Action] {
        guard !inboundFinished else { return [] }
        inboundFinished = true
        return [.finishInbound]
    }

    /// Our close frame; the timer is armed first, so that a close frame the client does not
    /// read cannot hold the session.
    private mutating func sendOwnClose(_ code: WebSocketErrorCode, reason: String?, now: C.Instant) -> [Action] {
        if inputEnded {
            // No close can come from a client that sent its FIN.
            state = .closed
            return [.sendClose(code, reason: reason), .closeChannel]
        }
        state = .closing(deadline: now.advanced(by: configuration.closeTimeout), awaitingClose: true)
        return [.armCloseTimer(configuration.closeTimeout), .sendClose(code, reason: reason)]
    }

    private mutating func receivedClose(_ data: ByteBuffer, now: C.Instant) -> [Action] {
        switch state {
        case .open:
            state = .closing(deadline: now.advanced(by: configuration.closeTimeout), awaitingClose: false)
            return finishInbound() + [.armCloseTimer(configuration.closeTimeout), .sendClose(Self.answer(toClose: data), reason: nil)]
        case .closing(_, awaitingClose: true):
            // The handshake is complete: the server closes the connection (RFC 6455 §7.1.1).
            state = .closed
            return finishInbound() + [.closeChannel]
        case .closing, .closed:
            return []
        }
    }

    /// A frame breaking the protocol: close 1002; the route's inbound ends. While a close is
    /// already out, the connection just closes.
    private mutating func protocolError(now: C.Instant) -> [Action] {
        // The broken message is over: later frames are judged on their own.
        fragmented = false
        switch state {
        case .open:
            return finishInbound() + sendOwnClose(.protocolError, reason: nil, now: now)
        case .closing:
            state = .closed
            return finishInbound() + [.closeChannel]
        case .closed:
            return []
        }
    }

    /// Our answer to a client's close frame with payload `data`: 1000, or 1002 for a 1-byte
    /// payload or a code not allowed on the wire (1004–1006, 1012–2999, beyond 4999).
    static func answer(toClose data: ByteBuffer) -> WebSocketErrorCode {
        if data.readableBytes == 0 { return .normalClosure }
        guard let code = data.getInteger(at: data.readerIndex, as: UInt16.self) else { return .protocolError }
        switch code {
        case 1000...1003, 1007...1011, 3000...4999: return .normalClosure
        default: return .protocolError
        }
    }
}
