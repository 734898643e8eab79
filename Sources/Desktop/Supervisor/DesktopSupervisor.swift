import AgentCore
import CoreMetrics
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Logging

/// One desktop per agent, shared by every viewer and action, started on first use.
/// Beyond the reference: a desktop whose process died is noticed on the next
/// use and started again (the reference's check watches a process that has already exited);
/// at shutdown it is stopped (`portabledesktop down`, or SIGTERM then SIGKILL to our Xvnc);
/// an idle desktop (no action, no viewer and no running recording for `idleTimeout`) can be
/// stopped; a failed start is remembered for 2 s so a retrying client cannot spawn a storm
/// of desktops.
public actor DesktopSupervisor {
    public struct Configuration: Sendable {
        public var width: Int
        public var height: Int
        /// Stop the desktop after this long without actions or viewers; nil keeps it.
        public var idleTimeout: Duration?
        /// The agent's environment (PATH, CODER_SCRIPT_BIN_DIR, XDG_*), passed to children.
        public var environment: [String: String]
        /// Where Xvnc's log goes (`desktop/` below it).
        public var stateDirectory: String
        /// Where the running desktop's `DISPLAY` is published for processes the agent
        /// starts (removed when it stops); nil publishes nothing.
        public var sessionEnvironment: SessionEnvironment?
        /// The silence bound of each call on the agent's VNC connection (tests shorten it).
        var vncTimeout = VNCClient.defaultTimeout

        public init(
            width: Int = 1920, height: Int = 1080, idleTimeout: Duration? = nil, environment: [String: String],
            stateDirectory: String, sessionEnvironment: SessionEnvironment? = nil
        ) {
            self.width = width
            self.height = height
            self.idleTimeout = idleTimeout
            self.environment = environment
            self.stateDirectory = stateDirectory
            self.sessionEnvironment = sessionEnvironment
        }
    }

    static let failureMemory: Duration = .seconds(2)

    let configuration: Configuration
    /// The running desktop; set only through ``adopt(_:)``, which publishes its `DISPLAY`.
    private var current: (any RunningDesktop)?
    /// The declared size of the latest action that declared one, on this desktop (for the
    /// status route: the size the model is told the screen has).
    private var declared: DisplayGeometry?
    /// When `current` was last found alive. A liveness check can read /proc/net/tcp (a
    /// portabledesktop's Xvnc is not our child), and every action asks twice (the route,
    /// then the VNC connection): one check a second is enough, a dead desktop also shows as
    /// a closed VNC connection.
    private var aliveAt: ContinuousClock.Instant?
    static let aliveCheckInterval: Duration = .seconds(1)
    private var client: VNCClient?
    private var starting: Task<Result<any RunningDesktop, DesktopError>, Never>?
    private var closed = false
    private var failure: (error: DesktopError, at: ContinuousClock.Instant)?
    private var lastActivity = ContinuousClock.now
    private var viewers = 0
    private let logger = Logger(label: "workspace-agent.desktop")

    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// The running desktop, starting one if there is none (or the last one died).
    public func ensureStarted() async throws(DesktopError) -> DesktopInfo {
        if closed { throw .closed }
        if let current {
            if let aliveAt, ContinuousClock.now - aliveAt < Self.aliveCheckInterval { return current.info }
            if current.isAlive {
                aliveAt = .now
                return current.info
            }
            aliveAt = nil
            logger.warning("the desktop stopped; a new one starts on this use", metadata: ["vnc_port": "\(current.info.vncPort)"])
            DesktopMetrics.crashes.increment()
            adopt(nil)
            aliveAt = nil
            if let old = client {
                client = nil
                await old.close()
            }
            await current.stop()
        }
        if let failure, ContinuousClock.now - failure.at < Self.failureMemory { throw failure.error }
        let task: Task<Result<any RunningDesktop, DesktopError>, Never>
        if let starting {
            task = starting
        } else {
            let launcher = try launcher()
            logger.info("starting the desktop", metadata: ["with": "\(launcher.summary)"])
            task = Task { () -> Result<any RunningDesktop, DesktopError> in
                do throws(DesktopError) {
                    return .success(try await launcher.start())
                } catch {
                    return .failure(error)
                }
            }
            starting = task
        }
        let result = await task.value
        if starting == task { starting = nil }
        switch result {
        case .success(let desktop):
            if closed {
                await desktop.stop()
                throw .closed
            }
            if current == nil {
                adopt(desktop)
                aliveAt = .now
                DesktopMetrics.starts.increment()
                logger.info("desktop ready", metadata: ["vnc_port": "\(desktop.info.vncPort)", "geometry": "\(desktop.info.width)x\(desktop.info.height)"])
            }
            return current?.info ?? desktop.info
        case .failure(let error):
            failure = (error, .now)
            logger.warning("the desktop did not start", metadata: ["error": "\(error)"])
            throw error
        }
    }

    /// The running desktop and the agent's VNC connection to it (made on first use, remade
    /// when the desktop or the connection changed).
    func session(retrying: Bool = true) async throws(DesktopError) -> (info: DesktopInfo, client: VNCClient) {
        let info = try await ensureStarted()
        if let client, client.isUsable, client.port == info.vncPort { return (info, client) }
        if let old = client {
            client = nil
            await old.close()
        }
        let fresh: VNCClient
        do {
            fresh = try await VNCClient.connect(port: info.vncPort, timeout: configuration.vncTimeout)
        } catch {
            // The desktop may have died since its last liveness check: check now (and
            // start a new one if so), once; not after a timeout (it is there, and silent).
            guard retrying, aliveAt != nil, !error.timedOut else { throw error }
            aliveAt = nil
            return try await session(retrying: false)
        }
        if let existing = client, existing.isUsable {
            await fresh.close()
            return (info, existing)
        }
        client = fresh
        return (info, fresh)
    }

    func recordActivity() { lastActivity = .now }

    /// When an action, a viewer or a recording's start last touched the desktop.
    var lastActivityInstant: ContinuousClock.Instant { lastActivity }

    func viewerOpened() {
        viewers += 1
        lastActivity = .now
        DesktopMetrics.viewers.record(viewers)
    }

    func viewerClosed() {
        viewers -= 1
        lastActivity = .now
        DesktopMetrics.viewers.record(viewers)
    }

    /// portabledesktop's path when it is what runs desktops (recordings need it).
    func portableDesktopBinary() -> String? {
        (try? launcher()).flatMap { ($0 as? PortableDesktopLauncher)?.binary }
    }

    /// portabledesktop's path when the running desktop is one it runs: not the agent's own
    /// Xvnc, started while portabledesktop was not there yet (`record` films its own).
    func runningPortableDesktopBinary() -> String? {
        (current as? PortableDesktop)?.binary
    }

    /// Stops the desktop when it has been idle for the configured timeout: no action, no
    /// viewer, and no recording running (`recording`: the recorder has one; a recording
    /// keeps the desktop it films).
    func stopIfIdle(recording: Bool = false) async {
        guard let timeout = configuration.idleTimeout, let desktop = current, viewers == 0, !recording,
            ContinuousClock.now - lastActivity >= timeout
        else { return }
        logger.info("stopping the idle desktop", metadata: ["idle_timeout": "\(timeout)"])
        adopt(nil)
        aliveAt = nil
        if let old = client {
            client = nil
            await old.close()
        }
        await desktop.stop()
    }

    /// Stops everything; later uses fail with "desktop closed".
    public func close() async {
        closed = true
        if let old = client {
            client = nil
            await old.close()
        }
        if let starting, case .success(let desktop) = await starting.value { await desktop.stop() }
        if let desktop = current {
            adopt(nil)
            aliveAt = nil
            await desktop.stop()
        }
    }

    /// Makes `desktop` the current one (nil: none) and publishes its `DISPLAY` for the
    /// processes the agent starts (or withdraws it).
    private func adopt(_ desktop: (any RunningDesktop)?) {
        current = desktop
        declared = nil
        configuration.sessionEnvironment?.set(desktop?.info.environment ?? [:], for: "desktop")
    }

    /// Notes the declared size an action used (`scaled_width`/`scaled_height`), for ``status()``.
    func noteDeclared(_ size: DisplayGeometry) {
        if current != nil { declared = size }
    }

    /// The running desktop and the declared size last used on it; nil when none runs (this
    /// starts nothing and is no activity). A desktop that died is reported as not running,
    /// and its `DISPLAY` withdrawn at once (the next use starts a new desktop).
    func status() -> (info: DesktopInfo, declared: DisplayGeometry?)? {
        guard let current else { return nil }
        if let aliveAt, ContinuousClock.now - aliveAt < Self.aliveCheckInterval { return (current.info, declared) }
        guard current.isAlive else {
            configuration.sessionEnvironment?.set([:], for: "desktop")
            return nil
        }
        aliveAt = .now
        return (current.info, declared)
    }

    private func launcher() throws(DesktopError) -> any DesktopLauncher {
        let environment = configuration.environment
        if let binary = DesktopBinaries.portableDesktop(environment) {
            return PortableDesktopLauncher(binary: binary, width: configuration.width, height: configuration.height, environment: environment)
        }
        if let xvnc = DesktopBinaries.onPath("Xvnc", environment) {
            return XvncLauncher(
                xvnc: xvnc, width: configuration.width, height: configuration.height,
                logDirectory: configuration.stateDirectory + "/desktop", environment: environment)
        }
        throw DesktopError("portabledesktop binary not found in PATH or script bin directory, and Xvnc is not installed")
    }
}

/// Where the desktop's programs are found.
enum DesktopBinaries {
    /// `portabledesktop` on PATH, else `$CODER_SCRIPT_BIN_DIR/portabledesktop` if it is a
    /// regular file with an execute bit.
    static func portableDesktop(_ environment: [String: String]) -> String? {
        if let found = onPath("portabledesktop", environment) { return found }
        guard let directory = environment["CODER_SCRIPT_BIN_DIR"], !directory.isEmpty else { return nil }
        let candidate = directory + "/portabledesktop"
        return isExecutableRegularFile(candidate) ? candidate : nil
    }

    static func onPath(_ name: String, _ environment: [String: String]) -> String? {
        for directory in (environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") where !directory.isEmpty {
            let candidate = "\(directory)/\(name)"
            if isExecutableRegularFile(candidate) { return candidate }
        }
        return nil
    }

}
