import AgentCore
import AgentHTTP

/// What the `--debug-address` listener serves, as the reference's debug server: the `/debug/`
/// routes of the modules given (logs, manifest, magicsock) except `/debug/prometheus`, which
/// the reference serves only on the API. Anything else is 404.
struct DebugListenerRoutes: HTTPModule {
    /// Modules mounted at the API's root; their services run there, not here.
    let modules: [any HTTPModule]

    var name: String { "debug listener" }

    func routes(_ routes: inout AgentRoutes) {
        for module in modules {
            var all = AgentRoutes()
            module.routes(&all)
            for route in all.routes where Self.served(route.path) { routes.add(route) }
        }
    }

    /// `debug/…` paths but `debug/prometheus`.
    static func served(_ path: String) -> Bool {
        let trimmed = path.hasPrefix("/") ? String(path.dropFirst()) : path
        return trimmed.hasPrefix("debug/") && trimmed != "debug/prometheus"
    }
}
