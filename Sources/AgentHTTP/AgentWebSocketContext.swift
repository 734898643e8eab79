import Hummingbird
import HummingbirdCore
import Logging

/// What a WebSocket route's handler gets: the upgrade request and its request context
/// (channel, path parameters, logger).
public struct AgentWebSocketContext: Sendable {
    public let request: Request
    public let requestContext: AgentRequestContext
    public var logger: Logger { requestContext.logger }
}
