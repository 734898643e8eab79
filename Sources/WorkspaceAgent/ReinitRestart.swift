import AgentCore
import AgentHost
import AgentRPC
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Prebuild reinitialisation for the running agent: `/reinit` watched beside it; an event for
/// an owner other than the last one shuts the agent down gracefully and marks it to start
/// again (``restartIfRequested(arguments:environment:)`` re-executes the binary), the same
/// owner again stops the watching.
final class ReinitRestart: Sendable {
    /// Carries the last owner into the re-executed agent (read at start, then unset).
    static let ownerVariable = "WORKSPACE_AGENT_REINIT_OWNER"

    private struct State {
        var lastOwner: String?
        var restartOwner: String?
    }
    private let state: Mutex<State>
    private let logger: Logger

    init(lastOwner: String?, logger: Logger) {
        state = Mutex(State(lastOwner: lastOwner.flatMap { $0.isEmpty ? nil : $0 }))
        self.logger = logger
    }

    /// The watcher as a module of `host`: a new owner's event shuts `host` down.
    func module(rest: CoderRESTClient, tokens: any SessionTokenSource, host: AgentHost) -> ReinitModule {
        let watcher = ReinitWatcher(rest: rest, tokens: tokens, logger: logger) { [self] event in
            let isNew = state.withLock { s -> Bool in
                guard event.ownerID != s.lastOwner else { return false }
                s.lastOwner = event.ownerID
                s.restartOwner = event.ownerID ?? ""
                return true
            }
            guard isNew else {
                logger.info("reinit event for the same owner ignored; reinit polling stopped", metadata: ["workspace_id": "\(event.workspaceID)"])
                return false
            }
            logger.info("agent reinitializing: shutting down to start again", metadata: ["workspace_id": "\(event.workspaceID)"])
            await host.shutdown()
            return false
        }
        return ReinitModule(watcher: watcher)
    }

    /// After the agent stopped: when an event asked for it, replaces this process with the
    /// binary again (same arguments, the environment it started with, the owner carried);
    /// returns only when no restart was asked for, or the exec failed.
    func restartIfRequested(arguments: [String], environment: [String: String]) {
        guard let owner = state.withLock({ $0.restartOwner }), let path = OwnExecutable.path() else { return }
        var next = environment
        next[Self.ownerVariable] = owner
        logger.info("agent reinitializing")
        let block = EnvironmentBlock(next)
        withCStrings(arguments) { argv in
            block.withPointers { envp in
                _ = execve(path, argv, envp)
            }
        }
        logger.critical("agent could not start again", metadata: ["error": "\(SystemCallError.message(errno))"])
    }
}
