import HTTPTypes
import NIOCore

/// An answer that never changes (`GET /healthz`), its status line, fields and length
/// serialized once. The connection writes it without making a request value at all: it adds
/// Date, its Server and `Connection: close` when it closes, then the body.
public final class ConstantAnswer: Sendable {
    public let response: ImmediateResponse
    /// "HTTP/1.1 200 OK", the route's fields and Content-Length, each line ended; nil when a
    /// field of the route's is one the server sets itself (Date, Server, Connection): such an
    /// answer goes the immediate handler's way, which merges them.
    let head: ByteBuffer?
    /// Whether the body is written (not for 1xx, 204 and 304).
    let hasBody: Bool

    public init(_ response: ImmediateResponse) {
        self.response = response
        let code = response.status.code
        hasBody = code >= 200 && code != 204 && code != 304
        let serverSet = response.headers.contains { $0.name == .date || $0.name == .server || $0.name == .connection }
        guard !serverSet else {
            head = nil
            return
        }
        var bytes = ByteBuffer()
        bytes.writeString("HTTP/1.1 \(code) \(response.status.reasonPhrase)\r\n")
        for field in response.headers where field.name != .contentLength {
            bytes.writeString("\(field.name.rawName): \(field.value)\r\n")
        }
        if hasBody { bytes.writeString("Content-Length: \(response.body.readableBytes)\r\n") }
        head = bytes
    }
}
