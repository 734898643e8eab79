import AgentCore
import Synchronization

/// coderd's REST API for an in-workspace command under instance identity, as the reference's
/// commands do it: the token exchanged for the cloud's identity at the first request (one
/// exchange per command), then every request sent with it.
public final class ExchangingRESTClient: CoderRESTRequesting {
    private let rest: CoderRESTClient
    private let source: any SessionTokenSource
    private let token = Mutex<String?>(nil)

    /// `rest` without a token; `source` gives it one (``InstanceIdentityTokenSource``).
    public init(rest: CoderRESTClient, source: any SessionTokenSource) {
        self.rest = rest
        self.source = source
    }

    public func send(
        _ method: String, _ path: String, query: [(String, String)], json body: [UInt8]?, timeout: Duration
    ) async throws(CoderRESTError) -> CoderRESTResponse {
        let known = token.withLock { $0 }
        let current: String
        if let known {
            current = known
        } else {
            do {
                current = try await source.sessionToken()
            } catch {
                throw .connection(method: method, url: rest.url(path, query: query), reason: "refresh token: \(error)")
            }
            token.withLock { $0 = current }
        }
        return try await rest.with(token: current).send(method, path, query: query, json: body, timeout: timeout)
    }
}
