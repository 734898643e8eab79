import AgentCore
import AgentRPC
import ServiceLifecycle

/// The `/reinit` watcher as a module: it stops at announce, and its end before shutdown
/// (409, the same owner) leaves the agent running.
struct ReinitModule: AgentModule {
    let watcher: ReinitWatcher

    var name: String { "reinit" }

    var services: [ModuleService] {
        [ModuleService("reinit", watcher, stopsIn: .announce, onSuccess: .ignore, onFailure: .ignore)]
    }
}
