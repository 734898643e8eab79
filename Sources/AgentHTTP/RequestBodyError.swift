/// Why a streamed request body ended before its end: what a route reading the body sees,
/// and what ``AgentResponder`` answers with (400, never 500: the client's mistake).
public enum RequestBodyError: Error, Sendable, CustomStringConvertible {
    /// The body's framing is broken (a chunk size that is not hex or overflows, too much
    /// chunk framing for its data): nothing after it on the connection can be read.
    case malformed(String)
    /// The client closed its side, or the connection ended, before the body did.
    case incomplete

    public var description: String {
        switch self {
        case .malformed(let detail): return "malformed request body: \(detail)"
        case .incomplete: return "the request body ended early"
        }
    }
}

/// The bytes of chunk framing (size lines, chunk extensions, line ends, trailers) that a
/// chunked request body may carry beyond what its data pays for. As in Go's net/http, each
/// chunk's data earns twice its length plus 16 bytes of framing, and at most
/// ``maxExcess`` more is allowed: a 100 KB chunk extension is refused (400), a stream of
/// tiny chunks is not.
struct ChunkFramingBudget: Sendable, Equatable {
    /// Framing beyond what the data pays for.
    static let maxExcess = 16 * 1024

    private var excess = 0

    /// Bytes of the body arrived on the wire (framing and data alike).
    mutating func received(_ bytes: Int) { excess += bytes }

    /// A data part of `bytes` came out of the decoder.
    mutating func data(_ bytes: Int) { excess = max(0, excess - 2 * bytes - 16) }

    var isExceeded: Bool { excess > Self.maxExcess }
}
