import AgentCore

/// A capability module that serves HTTP: every route it serves with its properties (method,
/// path relative to where the executable mounts it, body mode, executor, WebSocket upgrade,
/// handler), declared in one place, so that no module hard-codes its base path.
public protocol HTTPModule: AgentModule {
    /// Adds the module's routes to `routes` (paths relative to the mount point).
    func routes(_ routes: inout AgentRoutes)
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
