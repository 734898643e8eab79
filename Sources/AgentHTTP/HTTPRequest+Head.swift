import HTTPTypes
import NIOHTTP1
import NIOHTTPTypesHTTP1

extension HTTPRequest {
    /// The request of a parsed HTTP/1 head, as NIO's conversion builds it, without its URL
    /// parse for the usual origin-form target (`/path?query`, or `*`): that conversion runs
    /// Foundation's `URLComponents` on every target to find absolute-form ones, a few
    /// microseconds per request, and an origin-form target is the path unchanged.
    init(agentHead head: HTTPRequestHead) throws {
        guard let first = head.uri.utf8.first, first == UInt8(ascii: "/") || first == UInt8(ascii: "*") else {
            try self.init(head, secure: false, splitCookie: false)
            return
        }
        self.init(
            method: try Method(head.method),
            scheme: "http",
            authority: head.headers.first(name: "Host"),
            path: head.uri,
            headerFields: HTTPFields(head.headers, splitCookie: false))
    }
}
