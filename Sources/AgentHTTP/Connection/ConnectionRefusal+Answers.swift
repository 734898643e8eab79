import HTTPTypes

/// The answers the connection core writes itself, in the reference's words.
extension ConnectionRefusal {
    static let shuttingDown = ConnectionRefusal(
        status: .serviceUnavailable, body: APIErrorBody(message: "The agent is shutting down.", detail: "It accepts no new connections."))

    static let connect = ConnectionRefusal(
        status: .methodNotAllowed, body: APIErrorBody(message: "Method not allowed.", detail: "CONNECT is not supported."),
        headers: [.init(name: "Allow", value: "GET, POST")])

    /// RFC 9112 §6.1: a transfer coding the server does not know is answered 501; the body
    /// cannot be framed, so the connection closes.
    static func transferCoding(_ codings: String) -> ConnectionRefusal {
        ConnectionRefusal(
            status: .notImplemented,
            body: APIErrorBody(message: "Transfer coding not supported.", detail: "Only Transfer-Encoding: chunked is accepted; got \"\(codings)\"."))
    }

    static let expectation = ConnectionRefusal(
        status: .expectationFailed, body: APIErrorBody(message: "Expectation failed.", detail: "Only \"100-continue\" is supported."))

    static let bodyTooLarge = ConnectionRefusal(status: .contentTooLarge, body: APIError.bodyTooLarge.body)

    static let bodyIncomplete = ConnectionRefusal(status: .badRequest, body: APIError.bodyIncomplete.body)

    /// A WebSocket handshake that is not a connection's first request: sent to a new one.
    static func upgradeOnNewConnection(location: String) -> ConnectionRefusal {
        ConnectionRefusal(
            status: .temporaryRedirect,
            body: APIErrorBody(message: "Upgrade on a new connection.", detail: "A WebSocket handshake must be a connection's first request."),
            headers: [.init(name: "Location", value: location)])
    }

    static func requestLineTooLong(limit: Int) -> ConnectionRefusal {
        ConnectionRefusal(status: .uriTooLong, body: APIErrorBody(message: "Request line too long.", detail: "The limit is \(limit) bytes."))
    }

    static let headerFieldsTooLarge = ConnectionRefusal(
        status: .requestHeaderFieldsTooLarge,
        body: APIErrorBody(
            message: "Request header fields too large.",
            detail:
                "The limits are \(AgentHTTPLimits.maxHeaderFieldSize) bytes a field, \(AgentHTTPLimits.maxHeaderListSize) bytes in all and \(AgentHTTPLimits.maxHeaderFieldCount) fields."
        ))

    static func malformed(_ detail: String) -> ConnectionRefusal {
        ConnectionRefusal(status: .badRequest, body: APIErrorBody(message: "Malformed HTTP request.", detail: detail))
    }

    static func headTimeout(seconds: Int64) -> ConnectionRefusal {
        ConnectionRefusal(status: .requestTimeout, body: APIErrorBody(message: "Request timeout.", detail: "No complete request head within \(seconds) s."))
    }

    static func bodyTimeout(seconds: Int64) -> ConnectionRefusal {
        ConnectionRefusal(
            status: .requestTimeout, body: APIErrorBody(message: "Request timeout.", detail: "The request body did not arrive within \(seconds) s."))
    }

    static func tooManyWebSockets(_ limit: Int) -> ConnectionRefusal {
        ConnectionRefusal(
            status: .serviceUnavailable,
            body: APIErrorBody(
                message: "Too many WebSocket connections.", detail: "At most \(limit) WebSockets may be open at once; try again when one has closed."),
            headers: [.init(name: "Retry-After", value: "1")])
    }

    /// The handshake's route could not make its session after all (the upgrader refused it).
    static let upgradeFailed = ConnectionRefusal(
        status: .badRequest, body: APIErrorBody(message: "WebSocket upgrade failed.", detail: "The route could not start a session for this request."))
}
