import AgentCore
import OutboundProxy
import NIOCore
import Testing
@testable import MCPEngine
#if canImport(Glibc)
import Glibc
#endif

/// Which failed HTTP requests are sent again: the failures that mean the connection closed
/// before any answer, and the messages a server may get twice (the end-to-end cases are in
/// `MCPHTTPTransportEdgeTests`).
struct MCPHTTPRetryRuleTests {
    @Test func onlyAConnectionClosedBeforeTheAnswerIsRetried() {
        #expect(MCPHTTPConnection.closedBeforeAnswer(CheckedHTTPError.incompleteAnswer))
        #expect(MCPHTTPConnection.closedBeforeAnswer(ChannelError.ioOnClosedChannel))
        #expect(MCPHTTPConnection.closedBeforeAnswer(IOError(errnoCode: ECONNRESET, reason: "read")))
        #expect(!MCPHTTPConnection.closedBeforeAnswer(IOError(errnoCode: ECONNREFUSED, reason: "connect")))
        #expect(!MCPHTTPConnection.closedBeforeAnswer(ChannelError.connectTimeout(.seconds(10))))
        #expect(!MCPHTTPConnection.closedBeforeAnswer(CheckedHTTPError.timedOut))
        #expect(!MCPHTTPConnection.closedBeforeAnswer(CheckedHTTPError.unexpectedAnswer("101 Switching Protocols")))
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
}
