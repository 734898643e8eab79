import AgentCore

/// A speed test's opening request, tailscale's protocol version 2: one JSON value (Go's
/// `json.Encoder` writes it with a newline) `{"version":2,"time":<ns>,"direction":0|1}`,
/// decoded as Go decodes it into `speedtest.config`. `direction` is the client's view: 0, the
/// client downloads (the agent writes), 1, the client uploads (the agent reads); like the
/// reference, any other value makes the agent write.
public struct SpeedtestRequest: Equatable, Sendable {
    /// The protocol version the agent speaks.
    public static let version = 2
    /// The request is one JSON value of at most this many bytes; a longer one is refused.
    public static let maxBytes = 4096
    /// The longest test a client may ask for (the reference's client allows at most 30 s);
    /// a longer `time` is cut to this, a negative one counts as zero.
    public static let maxDuration: Duration = .seconds(30)

    public enum Direction: Equatable, Sendable {
        /// The client downloads: the agent writes 2 MiB blocks until the time has passed.
        case download
        /// The client uploads: the agent reads until EOF, at most the time and 5 s more.
        case upload
    }

    public var version: Int
    /// The test's length, already within `0...maxDuration`.
    public var duration: Duration
    public var direction: Direction

    public init(version: Int = Self.version, duration: Duration, direction: Direction) {
        self.version = version
        self.duration = duration
        self.direction = direction
    }

    /// What the agent answers a request with: `{}` and a newline to start the test, or
    /// `{"error":"..."}` and a newline (then the connection closes).
    public enum Answer: Equatable, Sendable {
        case start(SpeedtestRequest)
        case refuse(String)

        /// The answer's bytes, as Go's `json.Encoder` writes `configResponse`.
        public var bytes: [UInt8] {
            switch self {
            case .start: return Array("{}\n".utf8)
            case .refuse(let error): return Array("{\"error\":\(jsonQuote(error, escapingHTML: true))}\n".utf8)
            }
        }
    }

    /// Where the request's JSON value ends in `bytes` (the index after it), or nil while it
    /// is incomplete (see ``JSONValue/endOfFirstValue(in:)``).
    public static func end(of bytes: some Collection<UInt8>) -> Int? {
        JSONValue.endOfFirstValue(in: bytes)
    }

    /// The answer to the request in `bytes` (one whole JSON value, or what arrived before the
    /// client's EOF), with the reference's errors: Go's decode error texts, then
    /// `version mismatch! Server is version 2, client is version N`.
    public static func answer(_ bytes: some Collection<UInt8>) -> Answer {
        let value: JSONValue
        do {
            value = try JSONValue.parseFirst(bytes)
        } catch {
            // Go's decoder on a stream that ends early says EOF (nothing) or unexpected EOF.
            if bytes.allSatisfy({ [0x20, 0x09, 0x0a, 0x0d].contains($0) }) { return .refuse("EOF") }
            // Only when the input ran out; an error before its end is Go's own text.
            return .refuse("\(error)" == "unexpected end of JSON input" ? "unexpected EOF" : "\(error)")
        }
        switch value {
        case .null:
            return .refuse(mismatch(version: 0))
        case .object:
            break
        default:
            return .refuse("json: cannot unmarshal \(value.goKind) into Go value of type speedtest.config")
        }
        var version = 0
        var nanoseconds = 0
        var direction = 0
        // Go stores every field it can and reports the first type error.
        var firstError: String?
        for (key, goType) in [("version", "int"), ("time", "time.Duration"), ("direction", "speedtest.Direction")] {
            guard let member = value.goField(key), member != .null else { continue }
            guard case .number(let text) = member else {
                firstError = firstError ?? "json: cannot unmarshal \(member.goKind) into Go struct field config.\(key) of type \(goType)"
                continue
            }
            guard let number = Int(text) else {
                firstError = firstError ?? "json: cannot unmarshal number \(text) into Go struct field config.\(key) of type \(goType)"
                continue
            }
            switch key {
            case "version": version = number
            case "time": nanoseconds = number
            default: direction = number
            }
        }
        if let firstError { return .refuse(firstError) }
        guard version == Self.version else { return .refuse(mismatch(version: version)) }
        let duration = min(Duration.nanoseconds(max(nanoseconds, 0)), maxDuration)
        return .start(SpeedtestRequest(version: version, duration: duration, direction: direction == 1 ? .upload : .download))
    }

    static func mismatch(version: Int) -> String {
        "version mismatch! Server is version \(Self.version), client is version \(version)"
    }
}
