import AgentCore
import AgentHTTP
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// Runs the agent's modules: mounts their routes on the HTTP listeners, runs their services,
/// and stops them phase by phase (``ShutdownPhase``) within the shutdown bound.
///
/// The executable builds each module and hands it over with one line (``mount(_:at:)`` for
/// a module with routes, ``add(_:)`` for one without); the host does the rest:
/// - one HTTP server per listener (``listen(on:for:name:logMessage:addressKey:mounts:onListening:)``),
///   each a service of the `serving` phase; at the `announce` phase they stop taking new
///   connections (503), and connections still open half a second before the bound are closed;
/// - connections other modules hand over (``connections``, AgentHTTP's ``ChannelAcceptor``:
///   the tailnet's tunnel channels) are served by the HTTP API's routes, registry and
///   limits, as its listener's are, and stop with them;
/// - every module's ``AgentModule/upwardParticipants`` go into ``upwardParticipants``, which
///   the executable gives the control-plane session;
/// - every module's services in one `ServiceGroup`, ordered by phase: graceful shutdown stops
///   `announce` first and `serving` last (service-lifecycle stops services in the reverse
///   of their order; the phases, not the order modules were added in, decide it);
/// - SIGTERM, SIGINT and SIGHUP start the shutdown, a second one exits at once, and a
///   watchdog ends the process at the bound after each module's ``AgentModule/terminateNow()``.
public final class AgentHost: Sendable {
    /// The host's settings.
    public struct Configuration: Sendable {
        /// SIGTERM to exit, whatever clients or services do (the README states it).
        public var shutdownBound: Duration = .seconds(7)
        /// Trap the terminating signals (the daemon); a test host calls ``shutdown()``.
        public var handlesSignals = true
        /// Run the watchdog that ends the process at the bound (not inside a test process).
        public var enforcesBound = true
        /// The HTTP API (the first listener) logs one line per request at info.
        public var accessLog = true

        public init() {}
    }

    /// One HTTP listener and what it serves.
    struct Listener: Sendable {
        var address: BindTarget
        /// For the failure line: "the HTTP API".
        var what: String
        /// What requests see as `AgentRequestContext.listener` (``ListenerName``).
        var name: String
        /// Logged with the bound address once listening.
        var logMessage: String
        var addressKey: String
        /// Whether the agent cannot run without it (the HTTP API); an optional one (the
        /// Prometheus listener) that cannot bind is a logged warning and the agent runs on.
        var required: Bool
        var mounts: [HTTPMount]
        var connections: HTTPConnectionRegistry
        var onListening: (@Sendable (String) -> Void)?
    }

    private struct State {
        var modules: [any AgentModule] = []
        var listeners: [Listener] = []
        var group: ServiceGroup?
        var shutdownRequested = false
    }

    public let configuration: Configuration
    /// The bound and, once shutdown began, its deadline (shared with the modules).
    public let clock: ShutdownClock
    private let logger: Logger
    private let state = Mutex(State())
    private let controller: ShutdownController
    /// Connections handed over by modules, served by the HTTP API (the first listener).
    private let handedOver: HostConnections

    /// Where modules hand over connections they received elsewhere (NIO channels), to be
    /// served by the HTTP API: give it to them as ``AgentContext/connections``. Refuses what
    /// comes before the host runs, after it stopped, or when there is no listener.
    public var connections: any ChannelAcceptor { handedOver }

    /// The participants of every module added (``AgentModule/upwardParticipants``): the
    /// executable gives this to the control-plane session, which starts them on each
    /// connected session.
    public let upwardParticipants = UpwardParticipants()

    public init(configuration: Configuration = .init(), clock: ShutdownClock? = nil, logger: Logger) {
        self.configuration = configuration
        let clock = clock ?? ShutdownClock(bound: configuration.shutdownBound)
        self.clock = clock
        self.logger = logger
        let lastResort = LastResort()
        controller = ShutdownController(logger: logger, clock: clock, enforce: configuration.enforcesBound) {
            lastResort.run()
        }
        self.lastResort = lastResort
        handedOver = HostConnections()
    }

    private let lastResort: LastResort

    /// Adds a module without routes (its services and upward participants).
    public func add(_ module: any AgentModule) {
        state.withLock { $0.modules.append(module) }
        lastResort.append(module)
        for participant in module.upwardParticipants { upwardParticipants.add(participant) }
    }

    /// Adds a module and mounts its routes at `path` on the first listener (the HTTP API).
    public func mount(_ module: any HTTPModule, at path: String) {
        add(module)
        state.withLock { s in
            precondition(!s.listeners.isEmpty, "listen(on:...) for the HTTP API comes before mount(_:at:)")
            s.listeners[0].mounts.append(HTTPMount(module, at: path))
        }
    }

    /// Adds an HTTP listener. The first one is the HTTP API, where ``mount(_:at:)`` puts
    /// routes and whose routes also serve handed-over ``connections``; later ones serve
    /// exactly `mounts` (the Prometheus listener).
    /// - Parameters:
    ///   - name: what its requests see as `AgentRequestContext.listener` (``ListenerName``).
    ///   - required: false for a listener the agent can run without: when it cannot bind,
    ///     a warning is logged and the agent serves on without it.
    ///   - onListening: called with the bound address (`127.0.0.1:41234`).
    public func listen(
        on address: BindTarget, for what: String, name: String = ListenerName.http, logMessage: String, addressKey: String = "address",
        required: Bool = true, mounts: [HTTPMount] = [], onListening: (@Sendable (String) -> Void)? = nil
    ) {
        state.withLock { s in
            s.listeners.append(
                Listener(
                    address: address, what: what, name: name, logMessage: logMessage, addressKey: addressKey, required: required, mounts: mounts,
                    connections: HTTPConnectionRegistry(), onListening: onListening))
        }
    }

    /// Runs until graceful shutdown completes; throws ``StartupFailure`` when a required
    /// listener could not bind, and rethrows a service's error.
    public func run() async throws {
        let (modules, listeners) = state.withLock { ($0.modules, $0.listeners) }
        var services: [ModuleService] = [
            .onShutdown("stop accepting", in: .announce) { [clock, logger] in
                for listener in listeners { listener.connections.stopAccepting() }
                // Half a second before the bound, whatever is still open is closed, so that
                // the serving phase ends in time.
                let lastCall = (clock.deadline ?? .now + clock.bound) - .milliseconds(500)
                Task.detached {
                    try? await Task.sleep(until: lastCall, clock: .continuous)
                    let open = listeners.reduce(0) { $0 + $1.connections.count }
                    if open > 0 { logger.info("closing connections still open at the shutdown bound", metadata: ["count": "\(open)"]) }
                    for listener in listeners { listener.connections.closeAll() }
                }
            }
        ]
        for (index, listener) in listeners.enumerated() {
            let serving = AgentHTTPServing(
                mounts: listener.mounts, connections: listener.connections, accessLog: index == 0 && configuration.accessLog,
                logger: Logger(label: "workspace-agent.http"))
            services.append(makeHTTPService(listener, serving: serving))
            // The HTTP API's routes serve what modules hand over, beside its listener.
            if index == 0 {
                services.append(ModuleService("handed-over connections", HandedOverService(connections: handedOver, serving: serving), stopsIn: .serving))
            }
        }
        for module in modules { services += module.services }
        let group = ServiceGroup(configuration: Self.groupConfiguration(services, logger: logger))
        state.withLock { $0.group = group }
        let signals =
            configuration.handlesSignals
            ? await controller.listen { await group.triggerGracefulShutdown() } : nil
        defer { signals?.cancel() }
        // A shutdown() that came before the group existed.
        if state.withLock({ $0.shutdownRequested }) { await group.triggerGracefulShutdown() }
        logger.debug(
            "services in shutdown order",
            metadata: ["order": "\(Self.shutdownOrder(services).map { "\($0.phase):\($0.name)" })"])
        try await group.run()
    }

    /// Starts a graceful shutdown as the first SIGTERM would.
    public func shutdown() async {
        let group = state.withLock { s in
            s.shutdownRequested = true
            return s.group
        }
        await controller.requestShutdown(reason: "shutdown requested") {
            await group?.triggerGracefulShutdown()
        }
    }

    /// Services sorted so that service-lifecycle, which stops them in reverse order, stops
    /// `announce` first and `serving` last; within a phase, the last added stops first.
    static func shutdownOrder(_ services: [ModuleService]) -> [ModuleService] {
        // Stable sort by phase, then reversed: the order in which they stop.
        let startOrder = services.enumerated().sorted { a, b in
            a.element.phase != b.element.phase ? a.element.phase > b.element.phase : a.offset < b.offset
        }.map(\.element)
        return startOrder.reversed()
    }

    static func groupConfiguration(_ services: [ModuleService], logger: Logger) -> ServiceGroupConfiguration {
        // The group's list is the start order: the reverse of the shutdown order.
        let ordered = shutdownOrder(services).reversed().map { service in
            ServiceGroupConfiguration.ServiceConfiguration(
                service: service.service,
                successTerminationBehavior: service.successTerminationBehavior,
                failureTerminationBehavior: service.failureTerminationBehavior)
        }
        return ServiceGroupConfiguration(services: Array(ordered), logger: logger)
    }

    private func makeHTTPService(_ listener: Listener, serving: AgentHTTPServing) -> ModuleService {
        let listening = OnceFlag()
        let logger = logger
        let app = serving.application(address: listener.address, listener: listener.name) { channel in
            listening.set()
            let bound = channel.localAddress.map(Self.describe) ?? "\(listener.address)"
            logger.info("\(listener.logMessage)", metadata: [listener.addressKey: "\(bound)"])
            listener.onListening?(bound)
        }
        let service = HTTPService(
            app: app, address: listener.address, what: listener.what, required: listener.required, listening: listening, logger: logger
        ) { [controller] in controller.startupFailed() }
        return ModuleService(listener.what, service, stopsIn: .serving)
    }

    /// `127.0.0.1:2114`, `[::1]:2114` or `unix:/path`.
    static func describe(_ address: SocketAddress) -> String {
        switch address {
        case .v4: return "\(address.ipAddress ?? "?"):\(address.port ?? 0)"
        case .v6: return "[\(address.ipAddress ?? "?")]:\(address.port ?? 0)"
        case .unixDomainSocket: return "unix:\(address.pathname ?? "")"
        }
    }
}

/// The modules the watchdog's last resort reaches: its own list, so that the watchdog never
/// waits on the host's state.
private final class LastResort: Sendable {
    private let modules = Mutex<[any AgentModule]>([])

    func append(_ module: any AgentModule) {
        modules.withLock { $0.append(module) }
    }

    /// Each module's ``AgentModule/terminateNow()``; skipped if the list is being changed.
    func run() {
        guard let modules = modules.withLockIfAvailable({ $0 }) else { return }
        for module in modules { module.terminateNow() }
    }
}
