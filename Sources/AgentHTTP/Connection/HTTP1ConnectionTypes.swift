import HTTPTypes

/// What the connection core needs to know of a request head, read from the decoder's head
/// by the channel handler (``HTTP1ConnectionStateMachine/headReceived(_:route:now:)``).
struct RequestHeadFacts: Sendable, Equatable {
    enum TransferCoding: Sendable, Equatable {
        case none
        /// Only `chunked` (possibly repeated).
        case chunked
        /// Any other coding, as the client sent it: answered 501.
        case other(String)
    }

    enum Expectation: Sendable, Equatable {
        case none
        case continue100
        case other
    }

    enum Upgrade: Sendable, Equatable {
        case none
        /// An `Upgrade` that is not a well-formed WebSocket handshake (h2c, `foo`, a POST):
        /// ignored, the route answers it as a plain request.
        case other
        /// A GET with `Upgrade: websocket` and `Connection: upgrade`; whether its version
        /// is 13 and its key 16 bytes in base64.
        case webSocket(versionOK: Bool, keyOK: Bool)
    }

    var isConnect = false
    /// A HEAD: its answer, a refusal too, goes without a body.
    var isHead = false
    var transferCoding: TransferCoding = .none
    var declaredLength: Int?
    var expectation: Expectation = .none
    var upgrade: Upgrade = .none
    /// `Upgrade` with `Connection: upgrade`: NIO's decoder (llhttp) parses nothing after this
    /// request, so a connection whose upgrade is not taken closes after its answer.
    var decoderStops = false
    /// HTTP/1.1 without `Connection: close`, or HTTP/1.0 with `keep-alive`.
    var keepAlive = true
    /// The request target, for a 307's `Location`.
    var uri = ""

    init(
        isConnect: Bool = false, transferCoding: TransferCoding = .none, declaredLength: Int? = nil,
        expectation: Expectation = .none, upgrade: Upgrade = .none, decoderStops: Bool = false, keepAlive: Bool = true, uri: String = ""
    ) {
        self.decoderStops = decoderStops
        self.isConnect = isConnect
        self.transferCoding = transferCoding
        self.declaredLength = declaredLength
        self.expectation = expectation
        self.upgrade = upgrade
        self.keepAlive = keepAlive
        self.uri = uri
    }
}

/// An answer the connection core writes itself (without the HTTP codec), always followed by
/// a graceful close: the reference's JSON error body with `Connection: close`.
struct ConnectionRefusal: Sendable, Equatable {
    var status: HTTPResponse.Status
    var body: APIErrorBody
    var headers: [HeaderPair] = []
    /// The refused request is a HEAD: the answer says the body's length and leaves it out.
    var omitsBody = false

    struct HeaderPair: Sendable, Equatable {
        var name: String
        var value: String
    }

    static func == (a: Self, b: Self) -> Bool {
        a.status == b.status && a.body == b.body && a.headers == b.headers && a.omitsBody == b.omitsBody
    }
}

/// How a head the core lets through reaches the route.
struct HeadRewrite: OptionSet, Sendable, Equatable {
    let rawValue: UInt8
    /// `Upgrade` (and `Connection: upgrade`, `HTTP2-Settings`) removed: answered as a plain request.
    static let stripUpgrade = HeadRewrite(rawValue: 1)
    /// `Expect: 100-continue` removed (the core answers it).
    static let removeExpect = HeadRewrite(rawValue: 2)
}

/// Why a WebSocket handshake on a WebSocket route was turned into a plain request: its
/// route's plain twin answers (400 for a malformed key, 426 otherwise, or the route's error).
enum HandshakeRefusal: Sendable, Equatable {
    case badVersion
    case badKey
    /// The route's check or `prepare` refused it (the twin runs them again and answers).
    case route
}

/// How the request let through takes its body, from its route and its framing.
enum RequestBodyPlan: Sendable, Equatable {
    /// No body: the handler starts at once with an empty one.
    case empty
    /// A declared length up to ``HTTP1ConnectionStateMachine/collectLimit``: collected,
    /// then the handler starts.
    case collect(declared: Int)
    /// Anything else: the handler starts at once and reads the body as a stream.
    case stream
}

/// The connection's phase as the connection registry sees it (eviction picks the
/// longest-idle connection awaiting a head).
enum ConnectionPhaseReport: Sendable, Equatable {
    /// Since now.
    case awaitingHead
    case busy
    case webSocket
    /// Its last answer is written and it lingers: the first to be evicted.
    case lingering
}

/// The deadlines the core keeps; one timer of each kind at most.
enum ConnectionTimer: Int, Sendable, CaseIterable {
    /// A complete request head within the head timeout of the accept or the previous exchange.
    case head
    /// The request's body: in total (collected) or between bytes (streamed).
    case body
    /// After the last answer, how long the client may still send before the close.
    case linger
    /// A WebSocket's ping interval.
    case webSocketPing
    /// A response write waiting for the socket to take data.
    case writeStall
}

/// How a registry admission of a new connection went.
enum ConnectionAdmission: Sendable, Equatable {
    case admitted
    /// Over the cap with nothing to evict: closed at once.
    case refused
    /// The agent is shutting down: the first request is answered 503.
    case draining
}

/// The route's admission of a WebSocket handshake (its check, then a slot in the registry's
/// WebSocket budget).
enum WebSocketAdmission: Sendable, Equatable {
    /// Admitted; `prepare`: the route must run its async preparation before the upgrade.
    case admitted(prepare: Bool)
    /// The route's check refused it: its plain twin answers with the route's error.
    case checkFailed
    /// The WebSocket budget is used up: 503.
    case noSlot
}
