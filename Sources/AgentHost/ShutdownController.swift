import AgentCore
import FoundationEssentials
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// The agent's signal handling and the bound on how long it takes to stop.
///
/// - SIGTERM, SIGINT and SIGHUP start a graceful shutdown (SIGHUP as in the reference, which
///   treats it as an interrupt). A second one ends the agent at once.
/// - SIGUSR1, SIGUSR2, SIGALRM and SIGPIPE are ignored (logged at debug): their default
///   action would end the agent without cleanup and leave its children running.
/// - Whatever clients or services do, the agent exits within ``bound`` of the first
///   signal: a watchdog thread, independent of Swift concurrency and the event loops,
///   kills the process groups the agent still owns and exits.
final class ShutdownController: Sendable {
    /// A service that fails to start ends the agent within this.
    static let startupFailureBound: Duration = .seconds(1)

    private let logger: Logger
    private let clock: ShutdownClock
    /// nil when the bound is not enforced (a host inside a test process).
    private let watchdog: Watchdog?
    private let firstSignalAt = Mutex<ContinuousClock.Instant?>(nil)
    private var bound: Duration { clock.bound }

    /// - Parameters:
    ///   - enforce: run the watchdog that ends the process at the bound.
    ///   - killChildren: run by the watchdog before it exits (SIGKILL to every process
    ///     group the agent still owns); must be safe from any thread.
    init(logger: Logger, clock: ShutdownClock, enforce: Bool, killChildren: @escaping @Sendable () -> Void) {
        self.logger = logger
        self.clock = clock
        self.watchdog = enforce ? Watchdog(killChildren: killChildren) : nil
    }

    /// Traps the signals (their handlers are installed before this returns) and starts
    /// listening; `onShutdown` runs once, for the first terminating signal.
    func listen(onShutdown: @escaping @Sendable () async -> Void) async -> Task<Void, Never> {
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint, .sighup, .sigusr1, .sigusr2, .sigalrm, .sigpipe)
        return Task { [self] in
            for await signal in signals {
                switch signal {
                case .sigterm, .sigint, .sighup:
                    await requestShutdown(reason: "\(signal)", onShutdown: onShutdown)
                default:
                    logger.debug("ignored signal", metadata: ["signal": "\(signal)"])
                }
            }
        }
    }

    /// The first request starts the shutdown clock and arms the watchdog at the bound, then
    /// runs `onShutdown`; a second one ends the agent at once.
    func requestShutdown(reason: String, onShutdown: @Sendable () async -> Void) async {
        let now = ContinuousClock.now
        let first = firstSignalAt.withLock { at -> Bool in
            defer { at = at ?? now }
            return at == nil
        }
        if first {
            logger.info("shutting down", metadata: ["signal": "\(reason)", "bound": "\(bound)"])
            let deadline = clock.begin(at: now)
            watchdog?.arm(at: deadline, reason: "shutdown did not finish within \(bound)", exitCode: 1)
            await onShutdown()
        } else {
            logger.warning("second terminating signal: exiting now", metadata: ["signal": "\(reason)"])
            watchdog?.arm(at: now, reason: "second \(reason)", exitCode: 1)
        }
    }

    /// A service failed to start: the agent exits non-zero within ``startupFailureBound``
    /// even if another service does not stop.
    func startupFailed() {
        watchdog?.arm(
            at: .now + Self.startupFailureBound, reason: "a service failed to start and the agent did not stop in time",
            exitCode: 1)
    }
}

/// A thread that ends the process at a deadline; started when first armed.
private final class Watchdog: Sendable {
    private struct Armed {
        var deadline: ContinuousClock.Instant
        var reason: String
        var exitCode: Int32
    }

    private let armed = Mutex<Armed?>(nil)

    private let killChildren: @Sendable () -> Void

    init(killChildren: @escaping @Sendable () -> Void) {
        self.killChildren = killChildren
    }

    private func run() {
        while true {
            guard let current = armed.withLock({ $0 }) else { continue }
            let remaining = current.deadline - .now
            if remaining <= .zero {
                // Nothing here may block: no logger (its lock or a full stderr pipe), no wait
                // for the reactor's lock (killChildren gives up if it is held).
                let line = "workspace-agent: \(current.reason); killing owned process groups and exiting\n"
                _ = line.withCString { write(2, $0, strlen($0)) }
                killChildren()
                _exit(current.exitCode)
            }
            // Short naps so an earlier deadline (a second signal) takes effect quickly.
            usleep(UInt32(max(0, min(50_000, remaining / .microseconds(1)))))
        }
    }

    /// Sets the deadline, keeping an earlier one.
    func arm(at deadline: ContinuousClock.Instant, reason: String, exitCode: Int32) {
        let wasArmed = armed.withLock { current -> Bool in
            defer {
                if current == nil || deadline < current!.deadline {
                    current = Armed(deadline: deadline, reason: reason, exitCode: exitCode)
                }
            }
            return current != nil
        }
        if !wasArmed {
            // The thread exists only once armed: it costs nothing while the agent runs.
            AgentThread.start(name: "agent-shutdown-watchdog") { [self] in run() }
        }
    }
}
