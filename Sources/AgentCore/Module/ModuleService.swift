import ServiceLifecycle

/// One long-running piece of a module, with the phase in which it stops.
///
/// The service's `run()` starts its threads, sockets and watchers (nothing starts in an
/// initializer) and returns at graceful shutdown or cancellation.
public struct ModuleService: Sendable {
    /// Shown in logs ("processes", "control plane").
    public var name: String
    public var service: any Service
    public var phase: ShutdownPhase
    /// What happens to the agent when `run()` returns normally before shutdown, or throws
    /// (service-lifecycle's own terms; the default ends the agent, as a silent stop would
    /// leave a capability dead while the agent looks healthy).
    public var successTerminationBehavior: ServiceGroupConfiguration.ServiceConfiguration.TerminationBehavior
    public var failureTerminationBehavior: ServiceGroupConfiguration.ServiceConfiguration.TerminationBehavior

    public init(
        _ name: String, _ service: any Service, stopsIn phase: ShutdownPhase,
        onSuccess: ServiceGroupConfiguration.ServiceConfiguration.TerminationBehavior = .cancelGroup,
        onFailure: ServiceGroupConfiguration.ServiceConfiguration.TerminationBehavior = .cancelGroup
    ) {
        self.name = name
        self.service = service
        self.phase = phase
        self.successTerminationBehavior = onSuccess
        self.failureTerminationBehavior = onFailure
    }

    /// A step that needs no type of its own: it waits for graceful shutdown to reach its
    /// phase, runs `action` and returns (service-lifecycle's `ClosureService`).
    public static func onShutdown(
        _ name: String, in phase: ShutdownPhase, _ action: @escaping @Sendable () async -> Void
    ) -> ModuleService {
        ModuleService(
            name,
            ClosureService {
                try? await gracefulShutdown()
                await action()
            },
            stopsIn: phase)
    }
}
