import AgentCore
import Synchronization

/// coderd's REST API with a token from a ``SessionTokenSource``: for an in-workspace command
/// under instance identity, exchanged at the first request and kept (one exchange per command,
/// as the reference's commands); for the agent, its connection's latest token on each request.
public final class ExchangingRESTClient: CoderRESTRequesting {
    private let rest: CoderRESTClient
    private let source: any SessionTokenSource
    private let exchangesOnce: Bool
    private let token = Mutex<String?>(nil)

    /// `rest` without a token; `source` gives it one (``InstanceIdentityTokenSource``, or
    /// ``LatestSessionToken/remembered`` with `exchangesOnce` false).
    public init(rest: CoderRESTClient, source: any SessionTokenSource, exchangesOnce: Bool = true) {
        self.rest = rest
        self.source = source
        self.exchangesOnce = exchangesOnce
    }

    public func send(
        _ method: String, _ path: String, query: [(String, String)], json body: [UInt8]?, timeout: Duration
    ) async throws(CoderRESTError) -> CoderRESTResponse {
        let known = exchangesOnce ? token.withLock { $0 } : nil
        let current: String
        if let known {
            current = known
        } else {
            do {
                current = try await source.sessionToken()
            } catch {
                throw .connection(method: method, url: rest.url(path, query: query), reason: "refresh token: \(error)")
            }
            if exchangesOnce { token.withLock { $0 = current } }
        }
        return try await rest.with(token: current).send(method, path, query: query, json: body, timeout: timeout)
    }
}
