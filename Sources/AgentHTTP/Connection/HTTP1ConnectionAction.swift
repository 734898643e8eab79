/// What the channel handler does for the connection's state machine. An event returns a few
/// of these (``HTTP1ConnectionActions``), carried out in order. Not generic over the clock
/// (a timer is armed by its delay), so that every copy is a concrete one.
enum HTTP1ConnectionAction: Sendable, Equatable {
    /// Pass the bytes or the request part on (to the decoder, or to the request).
    case forward
    /// Let a request head through to its route, rewritten as said, its body taken as
    /// planned. `queued`: an earlier response is still being written, so it waits.
    case forwardHead(HTTP1ForwardedHead)
    /// Keep the request part: its handshake's route is still preparing (replayed after
    /// ``HTTP1ConnectionStateMachine/webSocketPrepared(_:route:now:)``).
    case hold
    /// The route's check and the WebSocket budget decide on a handshake: the handler
    /// answers with ``HTTP1ConnectionStateMachine/webSocketAdmission(_:now:)`` at once.
    case admitWebSocket
    /// Hold the handshake's head (and the parts behind it) while the route's async
    /// `prepare` runs; its outcome comes back as ``HTTP1ConnectionStateMachine/webSocketPrepared(_:now:)``.
    case prepareWebSocket
    /// Give the WebSocket slot back (a handshake not admitted after all).
    case releaseWebSocketSlot
    /// Write `100 Continue` ahead of the codec.
    case send100Continue
    /// Write this JSON answer ahead of the codec (it says `Connection: close`).
    indirect case refuse(ConnectionRefusal)
    /// End the request's body with this error (its handler answers 400).
    case failBody(HTTP1BodyFailure)
    /// The connection is a WebSocket from here on: check client frames for masks (from
    /// the bytes right behind the handshake's head).
    case switchToWebSocket
    /// Write a WebSocket ping (no payload).
    case ping
    /// Write a WebSocket close frame with this code.
    case sendClose(code: UInt16)
    /// Reading may go on: issue the `read()` withheld while
    /// ``HTTP1ConnectionStateMachine/readsPaused`` was true (a pipelined request waited, or
    /// a streamed body's reader was full).
    case resumeReads
    /// (Re)schedule the one wake-up of `timer` this long after the event's instant,
    /// replacing an earlier one; it comes back as ``HTTP1ConnectionStateMachine/timerFired(_:now:)``.
    case armTimer(ConnectionTimer, Duration)
    /// Tell the connection registry the connection's phase.
    case setPhase(ConnectionPhaseReport)
    /// Count a close for this reason (`http_connections_closed_total{reason}`).
    case countClose(String)
    /// Shut our side once everything written so far is out; the client's FIN or the
    /// linger deadline closes the rest.
    case closeOutput
    /// Close once everything written so far is out.
    case closeAfterWrites
    /// Close now.
    case close
}

/// A head let through: how to rewrite it and take its body.
struct HTTP1ForwardedHead: Sendable, Equatable {
    var rewrite: HeadRewrite = []
    var body: RequestBodyPlan = .empty
    /// A WebSocket handshake the route admitted: NIO's upgrader answers it.
    var handshake = false
    /// A handshake turned into a plain request, and why (its twin answers).
    var handshakeRefusal: HandshakeRefusal?
    /// An earlier response is still being written: the request waits for it.
    var queued = false
    /// The response must say `Connection: close` (HTTP/1.0, `Connection: close`).
    var keepAlive = true
}

/// Why a request's body ended early.
enum HTTP1BodyFailure: Sendable, Equatable {
    /// Broken framing (a parse error inside the body, too much chunk framing).
    case malformed(String)
    /// The client closed its side before the body ended.
    case incomplete
}

/// The actions of one event, in order. The first ``inlineCapacity`` are held inline (no
/// allocation for any event the machine has today: the most it yields is six); any beyond
/// go to an array, so no sequence of events can overflow it.
struct HTTP1ConnectionActions: Sequence, Sendable, Equatable {
    static var inlineCapacity: Int { 6 }
    typealias Action = HTTP1ConnectionAction
    /// Slots at and past ``count`` hold `.forward` as filler and are never read.
    private var storage: (Action, Action, Action, Action, Action, Action) = (.forward, .forward, .forward, .forward, .forward, .forward)
    /// Actions past the inline ones (empty, and unallocated, for every event today).
    private var spilled: [Action] = []
    private(set) var count = 0

    init() {}

    init(_ actions: [Action]) {
        for action in actions { append(action) }
    }

    mutating func append(_ action: Action) {
        switch count {
        case 0: storage.0 = action
        case 1: storage.1 = action
        case 2: storage.2 = action
        case 3: storage.3 = action
        case 4: storage.4 = action
        case 5: storage.5 = action
        default: spilled.append(action)
        }
        count += 1
    }

    /// The action at `index` (< ``count``).
    subscript(index: Int) -> Action {
        switch index {
        case 0: storage.0
        case 1: storage.1
        case 2: storage.2
        case 3: storage.3
        case 4: storage.4
        case 5: storage.5
        default: spilled[index - Self.inlineCapacity]
        }
    }

    var isEmpty: Bool { count == 0 }

    func contains(_ action: Action) -> Bool {
        for index in 0..<count where self[index] == action { return true }
        return false
    }

    struct Iterator: IteratorProtocol {
        let actions: HTTP1ConnectionActions
        var index = 0
        mutating func next() -> Action? {
            guard index < actions.count else { return nil }
            defer { index += 1 }
            return actions[index]
        }
    }

    func makeIterator() -> Iterator { Iterator(actions: self) }

    static func == (a: Self, b: Self) -> Bool {
        guard a.count == b.count else { return false }
        for index in 0..<a.count where a[index] != b[index] { return false }
        return true
    }
}
