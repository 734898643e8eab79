import AgentCore
import AsyncHTTPClient
import NIOCore
import Testing
@testable import MCPEngine
#if canImport(Glibc)
import Glibc
#endif

/// Which failed HTTP requests are sent again: the failures that mean the connection closed
/// before any answer, the messages a server may get twice, and the body that tells whether
/// anything of a message left (the end-to-end cases are in `MCPHTTPTransportTests`).
struct MCPHTTPRetryRuleTests {
    @Test func onlyAConnectionClosedBeforeTheAnswerIsRetried() {
        #expect(MCPHTTPConnection.closedBeforeAnswer(HTTPClientError.remoteConnectionClosed))
        #expect(MCPHTTPConnection.closedBeforeAnswer(ChannelError.ioOnClosedChannel))
        #expect(MCPHTTPConnection.closedBeforeAnswer(IOError(errnoCode: ECONNRESET, reason: "read")))
        #expect(!MCPHTTPConnection.closedBeforeAnswer(IOError(errnoCode: ECONNREFUSED, reason: "connect")))
        #expect(!MCPHTTPConnection.closedBeforeAnswer(HTTPClientError.connectTimeout))
        #expect(!MCPHTTPConnection.closedBeforeAnswer(HTTPClientError.deadlineExceeded))
        #expect(!MCPHTTPConnection.closedBeforeAnswer(CancellationError()))
    }

    @Test func aToolCallIsNeverRepeatedOnceItLeft() {
        #expect(!MCPHTTPConnection.mayRepeat(.request(id: .number(3), method: "tools/call", params: nil)))
        for method in ["initialize", "ping", "tools/list"] {
            #expect(MCPHTTPConnection.mayRepeat(.request(id: .number(3), method: method, params: nil)), "\(method)")
        }
        #expect(MCPHTTPConnection.mayRepeat(.notification(method: "notifications/cancelled", params: nil)))
        #expect(MCPHTTPConnection.mayRepeat(.result(id: .number(1), .object([]))))
    }

    @Test func theBodySaysWhetherItWasTaken() async {
        let body = MCPHTTPTrackedBody(ByteBuffer(string: "{}"))
        #expect(!body.taken)
        var iterator = body.makeAsyncIterator()
        #expect(await iterator.next() == ByteBuffer(string: "{}"))
        #expect(body.taken)
        #expect(await iterator.next() == nil)
    }
}
