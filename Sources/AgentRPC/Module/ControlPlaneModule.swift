import AgentCore
import AgentProto
import Logging

/// The upward connection as a capability module. Its session is also the agent's
/// ``UpwardSink`` and ``ManifestSource``, which the executable hands to the other modules.
///
/// Shutdown: at `announce` it queues SHUTTING_DOWN and limits the final reports to half a
/// second before the agent's bound; at `upward` (after the work phase ended the process
/// groups) it sends the final states and what is queued, then closes the connection.
public struct ControlPlaneModule: AgentModule {
    public let session: ControlPlaneSession
    private let clock: ShutdownClock
    /// Keeps the deployment's announcement banners fresh on each connected session.
    private let banners: AnnouncementBannerRefresh

    public var name: String { "control plane" }

    /// - Parameters:
    ///   - participants: the modules' work on each connected session (the host's
    ///     `upwardParticipants`).
    ///   - startOutcomeFromModule: a module (the scripts) reports the start and stop outcomes.
    ///   - banners: where the announcement banners are stored (``AgentContext/announcementBanners``).
    ///   - subsystems: sent in UpdateStartup (`CODER_AGENT_SUBSYSTEM`).
    ///   - prepareManifest: runs on every manifest before it is published.
    ///   - logger: should not forward upward (the session's own failures would feed the
    ///     queue they are about).
    public init(
        configuration: ControlPlaneOptions.Configuration, agentVersion: String, clock: ShutdownClock,
        participants: UpwardParticipants = UpwardParticipants(), startOutcomeFromModule: Bool = false,
        banners: AnnouncementBanners = AnnouncementBanners(), subsystems: [Coder_Agent_V2_Startup.Subsystem] = [],
        prepareManifest: ManifestPreparation? = nil, logger: Logger
    ) {
        var dialer: (any ControlPlaneDialer)?
        if let url = configuration.url, let tokenSource = configuration.sessionTokenSource {
            // 2.11 (session counts per app), and 2.10 from a control plane that refuses it.
            dialer = WebSocketDialer(
                baseURL: url, tokenSource: tokenSource, headers: configuration.headers.pairs, version: AgentAPIVersion.current.description,
                fallbackVersions: [AgentAPIVersion.v2_10.description], logger: logger)
        }
        var sessionConfiguration = ControlPlaneSession.Configuration(agentVersion: agentVersion)
        sessionConfiguration.startOutcomeFromModule = startOutcomeFromModule
        sessionConfiguration.subsystems = subsystems
        sessionConfiguration.prepareManifest = prepareManifest
        sessionConfiguration.controlPlaneURL = configuration.url ?? ""
        session = ControlPlaneSession(
            configuration: sessionConfiguration, dialer: dialer, logger: logger, participants: participants)
        self.clock = clock
        self.banners = AnnouncementBannerRefresh(store: banners, logger: logger)
    }

    /// What the shutdown keeps for itself after the final reports' last attempt.
    static let teardownReserve: Duration = .seconds(2)

    public var upwardParticipants: [any UpwardParticipant] { [banners] }

    public var services: [ModuleService] {
        [
            .onShutdown("announce shutdown", in: .announce) { [session, clock] in
                // The final reports end 2 s before the bound (5 s of the base 7 s), leaving the
                // rest of the shutdown its time on a busy host: half a second was not enough
                // for a loaded debug build, and the watchdog then ended the agent with 1.
                let lastCall = (clock.deadline ?? .now + clock.bound) - Self.teardownReserve
                session.limitShutdown(until: lastCall)
                session.setLifecycle(.shuttingDown)
            },
            ModuleService("control plane", session, stopsIn: .upward),
        ]
    }
}
