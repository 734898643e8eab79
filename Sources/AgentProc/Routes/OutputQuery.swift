import Synchronization
import AgentCore
import AgentHTTP
import Hummingbird
import LineRegex

/// The query of `GET /{id}/output`, checked before anything waits:
/// - `wait=true`: until exit (the reference);
/// - `until=<RE2>` or `until_literal=<text>`, `from=<offset>`, `port=<n>`, `timeout=<Go duration>`:
///   an await (implies waiting);
/// - `offset=<n>&limit=<m>`: a cursor read from the spool, answered at once.
struct OutputQuery: Sendable {
    /// Largest `limit` of a cursor read (a larger one is 400), and the default.
    static let maxLimit = 4 << 20
    static let defaultLimit = 64 * 1024

    struct CursorRead: Sendable {
        var offset: UInt64
        var limit: Int
    }

    var wait = false
    var `await`: ProcessManager.AwaitRequest?
    var cursor: CursorRead?

    init(_ query: GoQuery, maxWait: Duration) throws(APIError) {
        wait = query.get("wait") == "true"
        if let offset = query.get("offset") {
            guard let value = UInt64(offset) else { throw Self.invalid("offset", "a byte offset (0 or more)") }
            var limit = Self.defaultLimit
            if let text = query.get("limit") {
                // Outside 1...maxLimit on either side: 400 (not clamped), as the OpenAPI document says.
                guard let value = Int(text), (1...Self.maxLimit).contains(value) else {
                    throw Self.invalid("limit", "1 to \(Self.maxLimit)")
                }
                limit = value
            }
            cursor = CursorRead(offset: value, limit: limit)
            if query.get("until") != nil || query.get("until_literal") != nil || query.get("port") != nil {
                throw APIError(.badRequest, "Invalid output query.", detail: "offset reads answer at once; they do not combine with until, until_literal or port.")
            }
            return
        }
        if query.get("limit") != nil { throw Self.invalid("limit", "only with offset") }
        var condition: LineCondition?
        let pattern = query.get("until")
        let literal = query.get("until_literal")
        if pattern != nil && literal != nil {
            throw APIError(.badRequest, "Invalid output query.", detail: "Send until or until_literal, not both.")
        }
        if let pattern {
            do {
                condition = .pattern(try LineRegex(pattern))
            } catch {
                throw APIError(
                    .badRequest, "Invalid until pattern.", detail: "error parsing regexp: \(error.description)",
                    validations: [.init(field: "until", detail: error.description)])
            }
        } else if let literal {
            guard !literal.isEmpty else { throw Self.invalid("until_literal", "not empty") }
            guard literal.utf8.count <= LineRegex.maxPatternBytes else { throw Self.invalid("until_literal", "at most \(LineRegex.maxPatternBytes) bytes") }
            condition = .literal(Array(literal.utf8))
        }
        var port: UInt16?
        if let text = query.get("port") {
            guard let value = UInt16(text), value > 0 else { throw Self.invalid("port", "1 to 65535") }
            port = value
        }
        var from: UInt64 = 0
        if let text = query.get("from") {
            guard let value = UInt64(text) else { throw Self.invalid("from", "a byte offset (0 or more)") }
            from = value
        }
        var timeout = maxWait
        if let text = query.get("timeout") {
            let value: Duration
            do {
                value = try GoDuration.parse(text)
            } catch {
                throw Self.invalid("timeout", "a Go duration such as 10s or 2m")
            }
            guard value >= .zero else { throw Self.invalid("timeout", "not negative") }
            guard value <= maxWait else { throw Self.invalid("timeout", "at most \(maxWait)") }
            timeout = value
        }
        if condition != nil || port != nil || (wait && query.get("timeout") != nil) {
            self.await = ProcessManager.AwaitRequest(condition: condition, from: from, port: port, timeout: timeout)
        } else if query.get("from") != nil {
            throw Self.invalid("from", "only with until or until_literal")
        }
    }

    static func invalid(_ field: String, _ expected: String) -> APIError {
        APIError(
            .badRequest, "Invalid output query.", detail: "\(field) must be \(expected).",
            validations: [.init(field: field, detail: expected)])
    }
}
