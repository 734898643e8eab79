import FoundationEssentials

/// coderd's REST API as the agent (its token, the deployment's headers): implemented by the
/// upward module's client, used by the in-workspace commands (external auth, the git key).
public protocol CoderRESTRequesting: Sendable {
    /// Sends one request and reads its whole, bounded answer; a JSON `body` goes with
    /// `Content-Type: application/json`.
    func send(
        _ method: String, _ path: String, query: [(String, String)], json body: [UInt8]?, timeout: Duration
    ) async throws(CoderRESTError) -> CoderRESTResponse
}

extension CoderRESTRequesting {
    /// `GET path?query` with the SDK's 30 s timeout.
    public func get(_ path: String, query: [(String, String)] = [], timeout: Duration = .seconds(30)) async throws(CoderRESTError) -> CoderRESTResponse {
        try await send("GET", path, query: query, json: nil, timeout: timeout)
    }
}

/// One whole answer from coderd.
public struct CoderRESTResponse: Sendable {
    public var method: String
    public var url: String
    public var status: Int
    public var body: [UInt8]

    public init(method: String, url: String, status: Int, body: [UInt8]) {
        self.method = method
        self.url = url
        self.status = status
        self.body = body
    }

    /// coderd's error body (`{"message", "detail", "validations"}`), when the body is one.
    public var apiError: CoderAPIErrorBody? {
        try? JSONDecoder().decode(CoderAPIErrorBody.self, from: Data(body))
    }

    /// The reference's `codersdk.Error` text for a status it did not expect:
    /// `GET <url>: unexpected status code 404: <message>` and the detail on a line of its own.
    public var unexpectedStatusText: String {
        var text = "\(method) \(url): unexpected status code \(status)"
        let error = apiError
        text += ": " + (error?.message ?? "")
        if let detail = error?.detail, !detail.isEmpty { text += "\n\tError: " + detail }
        for validation in error?.validations ?? [] { text += "\n\t\(validation.field): \(validation.detail)" }
        return text
    }
}

/// coderd's error body.
public struct CoderAPIErrorBody: Decodable, Sendable {
    public struct Validation: Decodable, Sendable {
        public var field: String
        public var detail: String
    }

    public var message: String
    public var detail: String?
    public var validations: [Validation]?
}

/// Why a request got no answer.
public enum CoderRESTError: Error, CustomStringConvertible {
    case connection(method: String, url: String, reason: String)
    case tooLarge(method: String, url: String, limit: Int)

    public var description: String {
        switch self {
        case .connection(let method, let url, let reason):
            return "\(method) \(url): \(reason)"
        case .tooLarge(let method, let url, let limit):
            return "\(method) \(url): the answer is larger than \(limit >> 10) KiB"
        }
    }
}
