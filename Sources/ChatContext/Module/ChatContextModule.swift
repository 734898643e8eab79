import AgentCore
import AgentHTTP
import Glibc
import Hummingbird

/// The chat context as a capability module, mounted at `/api/v0`: the context manager (a
/// service that stops with the work phase) and its routes, `/context/...` (the sources API
/// and resync) and the legacy `/context-config`.
public struct ChatContextModule: HTTPModule {
    public let manager: ContextManager

    public var name: String { "chat context" }

    /// `directory` is `--directory` (the working directory until a manifest names one).
    public init(configuration: ChatContextOptions.Configuration, context: AgentContext, directory: String?,
                maxWatches: Int = ContextWatcher.defaultMaxWatches) {
        let home = Self.home(context.environment)
        manager = ContextManager(
            configuration: configuration, home: home, directory: directory, manifest: context.manifest,
            gate: context.startPhase.map { .afterStartPhase($0) } ?? .open, maxWatches: maxWatches)
    }

    public var services: [ModuleService] {
        [ModuleService("chat context", manager, stopsIn: .work)]
    }

    public func routes() -> RouteCollection<AgentRequestContext> {
        ContextRoutes(manager: manager).collection()
    }

    /// `$HOME`, else the user's home from the password database, else `/`.
    static func home(_ environment: [String: String]) -> String {
        if let home = environment["HOME"], !home.isEmpty { return ContextSourcePath.clean(home) }
        if let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir { return String(cString: dir) }
        return "/"
    }
}
