import AgentCore
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import Hummingbird

/// The reference's error body: `{"message", "detail"?, "validations"?}` (spec process-api §1).
public struct APIErrorBody: Codable, Sendable, Equatable {
    public struct Validation: Codable, Sendable, Equatable {
        public var field: String
        public var detail: String
        public init(field: String, detail: String) {
            self.field = field
            self.detail = detail
        }
    }

    public var message: String
    public var detail: String?
    public var validations: [Validation]?

    public init(message: String, detail: String? = nil, validations: [Validation]? = nil) {
        self.message = message
        self.detail = detail
        self.validations = validations
    }
}

/// An error a route throws to answer with a status and the reference's JSON error body.
public struct APIError: HTTPResponseError, CustomStringConvertible {
    public let status: HTTPResponse.Status
    public let body: APIErrorBody
    /// Extra response headers (426 names the WebSocket version it wants).
    public var headers: HTTPFields = [:]

    public init(
        _ status: HTTPResponse.Status, _ message: String, detail: String? = nil,
        validations: [APIErrorBody.Validation]? = nil
    ) {
        self.status = status
        self.body = APIErrorBody(message: message, detail: detail, validations: validations)
    }

    /// 413 for a body over ``AgentHTTPLimits/maxRequestBody``.
    /// The client closed its side before the body it announced ended.
    public static var bodyIncomplete: APIError {
        APIError(.badRequest, "Request body incomplete.", detail: "The connection ended before the body did.")
    }

    public static var bodyTooLarge: APIError {
        APIError(.contentTooLarge, "Request body too large.", detail: "The limit is \(AgentHTTPLimits.maxRequestBody) bytes.")
    }

    /// The numeric status code.
    public var statusCode: Int { status.code }

    public var description: String { "\(status.code) \(body.message)" + (body.detail.map { ": \($0)" } ?? "") }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        response()
    }

    /// The JSON answer: the status, the body and the extra headers.
    public func response() -> Response {
        immediateResponse().response
    }

    /// The same answer, made at once.
    public func immediateResponse() -> ImmediateResponse {
        var response = ImmediateResponse.json(body, status: status)
        response.headers.append(contentsOf: headers)
        return response
    }
}

/// Encodes `Encodable` values as JSON responses.
public enum JSONResponse {
    /// The JSON bytes of `value` and a newline (sorted keys, slashes unescaped).
    static func encode(_ value: some Encodable) -> ByteBuffer {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(128)
        do {
            try CompactJSONEncoder().encode(value, into: &bytes)
        } catch {
            bytes = Array(#"{"message":"Failed to encode response."}"#.utf8)
        }
        bytes.append(UInt8(ascii: "\n"))
        return ByteBuffer(bytes: bytes)
    }

    public static let contentType = "application/json; charset=utf-8"

    /// A JSON response; encoding failures (impossible for our plain structs) become a 500 body.
    public static func make(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
        ImmediateResponse.json(value, status: status).response
    }
}
