import AgentCore
import Hummingbird

/// A capability module that serves HTTP: its routes, relative to the path the executable
/// mounts it at (`addRoutes(_:atPath:)`), so that no module hard-codes its base path.
public protocol HTTPModule: AgentModule {
    /// Plain HTTP routes (a fresh collection per call).
    func routes() -> RouteCollection<AgentRequestContext>
    /// WebSocket routes; the server also answers plain requests to them.
    func webSocketRoutes() -> WebSocketRouteCollection
    /// Routes (relative, no parameters) whose handlers stream the request body themselves:
    /// exempt from the 1 MiB body cap, with an idle body deadline instead of a total one.
    func streamingUploadPaths() -> [String]
}

extension HTTPModule {
    public func routes() -> RouteCollection<AgentRequestContext> { RouteCollection(context: AgentRequestContext.self) }
    public func webSocketRoutes() -> WebSocketRouteCollection { WebSocketRouteCollection() }
    public func streamingUploadPaths() -> [String] { [] }
}

/// A module mounted at a base path ("/api/v0/processes"; "/" for the root).
public struct HTTPMount: Sendable {
    public var path: String
    public var module: any HTTPModule

    public init(_ module: any HTTPModule, at path: String) {
        self.path = path
        self.module = module
    }
}
