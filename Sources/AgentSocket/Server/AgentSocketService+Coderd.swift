import AgentCore
import AgentJSON
import AgentProto
import DRPC
import SwiftProtobuf

/// Extension (not in the reference): the in-workspace commands' two coderd requests (the
/// owner's external-auth tokens, the Coder git key) made by the agent with its own token, for
/// commands started under `--hide-agent-token`, which never see it. Only those two routes, only
/// GET: the socket is no general way to act as the agent. Request and answer are
/// `google.protobuf.StringValue` holding JSON (what ``parseCoderdRequest(_:)`` reads and
/// ``coderdAnswer(_:)`` writes).
extension AgentSocketService {
    public static let coderdGetMethod = DRPCMethodPath.agentSocket("CoderdGet")
    /// The routes a command may ask for.
    public static let coderdRoutes: Set<String> = [
        "/api/v2/workspaceagents/me/external-auth", "/api/v2/workspaceagents/me/gitsshkey",
    ]
    /// A request's JSON larger than this, or with more query items, is refused.
    static let maxCoderdRequestBytes = 16 << 10
    static let maxCoderdQueryItems = 16
    /// One request's bound (a `listen` wait is asked again by the command after it).
    static let coderdTimeout: Duration = .seconds(30)

    func registerCoderd(on server: inout CountingServer) {
        server.register(Self.coderdGetMethod) { bytes in
            let request = try Google_Protobuf_StringValue(serializedBytes: bytes)
            let (path, query) = try Self.parseCoderdRequest(request.value)
            guard let api = self.coderREST else { throw SocketError("the agent runs without a control plane: there is no coderd to ask") }
            let response: CoderRESTResponse
            do throws(CoderRESTError) {
                response = try await api.get(path, query: query, timeout: Self.coderdTimeout)
            } catch {
                throw SocketError(error.description)
            }
            var answer = Google_Protobuf_StringValue()
            answer.value = Self.coderdAnswer(response)
            return try answer.serializedBytes()
        }
    }

    /// `{"path": "/api/v2/…", "query": [["name", "value"], …]}`, checked against the routes.
    static func parseCoderdRequest(_ text: String) throws(SocketError) -> (String, [(String, String)]) {
        guard text.utf8.count <= maxCoderdRequestBytes else { throw SocketError("coderd request: larger than \(maxCoderdRequestBytes >> 10) KiB") }
        guard let value = try? JSONValue.parseWhole(Array(text.utf8)), let path = value["path"]?.stringValue else {
            throw SocketError("coderd request: not a JSON object with a path")
        }
        guard coderdRoutes.contains(path) else { throw SocketError("coderd request: \(goQuote(path)) is not a route commands may ask for") }
        var query: [(String, String)] = []
        for item in value["query"]?.arrayValue ?? [] {
            guard let pair = item.arrayValue, pair.count == 2, let name = pair[0].stringValue, let text = pair[1].stringValue else {
                throw SocketError("coderd request: a query item is not a [name, value] pair")
            }
            query.append((name, text))
        }
        guard query.count <= maxCoderdQueryItems else { throw SocketError("coderd request: more than \(maxCoderdQueryItems) query items") }
        return (path, query)
    }

    /// `{"status": 200, "method": "GET", "url": "…", "body": "…"}` (the body as text: coderd
    /// answers JSON).
    static func coderdAnswer(_ response: CoderRESTResponse) -> String {
        JSONValue.object([
            ("status", .number(String(response.status))), ("method", .string(response.method)), ("url", .string(response.url)),
            ("body", .string(String(decoding: response.body, as: UTF8.self))),
        ]).jsonText
    }
}
