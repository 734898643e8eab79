import AgentCore
import AgentJSON
import SwiftProtobuf

/// coderd's routes for the in-workspace commands, asked of the agent that started them
/// (``AgentSocketService/coderdGetMethod``) instead of coderd itself: what the git helpers
/// use when the agent keeps its token to itself. Each request, connect and answer together,
/// takes at most the timeout it is given (a wedged agent, or another program at the socket's
/// path, fails it instead of holding the command for ever).
public struct AgentSocketCoderREST: CoderRESTRequesting {
    public let client: AgentSocketClient

    public init(client: AgentSocketClient) {
        self.client = client
    }

    public func send(
        _ method: String, _ path: String, query: [(String, String)], json body: [UInt8]?, timeout: Duration
    ) async throws(CoderRESTError) -> CoderRESTResponse {
        guard method == "GET", body == nil else {
            throw .connection(method: method, url: path, reason: "the agent socket asks coderd with GET only")
        }
        var request = Google_Protobuf_StringValue()
        request.value =
            JSONValue.object([
                ("path", .string(path)), ("query", .array(query.map { .array([.string($0.0), .string($0.1)]) })),
            ]).jsonText
        let answer: String
        do {
            answer = try await client.unary("CoderdGet", request, as: Google_Protobuf_StringValue.self, timeout: timeout).value
        } catch {
            throw .connection(method: method, url: path, reason: error.description)
        }
        guard let value = try? JSONValue.parseWhole(Array(answer.utf8)), let status = value["status"]?.intValue else {
            throw .connection(method: method, url: path, reason: "the agent socket's answer is not a coderd answer")
        }
        return CoderRESTResponse(
            method: value["method"]?.stringValue ?? method, url: value["url"]?.stringValue ?? path, status: status,
            body: Array((value["body"]?.stringValue ?? "").utf8))
    }
}
