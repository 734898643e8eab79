import Foundation
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
    /// SIGTERM to exit, stated in the README: 5 s grace for process groups, then SIGKILL,
    /// the final lifecycle report and the last connections, all within this.
    static let bound: Duration = .seconds(7)
    /// A service that fails to start ends the agent within this.
    static let startupFailureBound: Duration = .seconds(1)

    private let logger: Logger
    private let watchdog: Watchdog
    private let firstSignalAt = Mutex<ContinuousClock.Instant?>(nil)

    /// - Parameter killChildren: run by the watchdog before it exits (SIGKILL to every
    ///   process group the agent still owns); must be safe from any thread.
    init(logger: Logger, killChildren: @escaping @Sendable () -> Void) {
        self.logger = logger
        self.watchdog = Watchdog(killChildren: killChildren)
    }

    /// Traps the signals (their handlers are installed before this returns) and starts
    /// listening; `onShutdown` runs once, for the first terminating signal.
    func listen(onShutdown: @escaping @Sendable (ContinuousClock.Instant) async -> Void) async -> Task<Void, Never> {
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint, .sighup, .sigusr1, .sigusr2, .sigalrm, .sigpipe)
        return Task { [self] in
            for await signal in signals {
                switch signal {
                case .sigterm, .sigint, .sighup:
                    let now = ContinuousClock.now
                    let first = firstSignalAt.withLock { at -> Bool in
                        defer { at = at ?? now }
                        return at == nil
                    }
                    if first {
                        logger.info("shutting down", metadata: ["signal": "\(signal)", "bound": "\(Self.bound)"])
                        watchdog.arm(at: now + Self.bound, reason: "shutdown did not finish within \(Self.bound)", exitCode: 1)
                        await onShutdown(now)
                    } else {
                        logger.warning("second terminating signal: exiting now", metadata: ["signal": "\(signal)"])
                        watchdog.arm(at: now, reason: "second \(signal)", exitCode: 1)
                    }
                default:
                    logger.debug("ignored signal", metadata: ["signal": "\(signal)"])
                }
            }
        }
    }

    /// A service failed to start: the agent exits non-zero within ``startupFailureBound``
    /// even if another service does not stop.
    func startupFailed() {
        watchdog.arm(
            at: .now + Self.startupFailureBound, reason: "a service failed to start and the agent did not stop in time",
            exitCode: 1)
    }
}

/// A thread that ends the process at a deadline. It sleeps on a semaphore until armed, so
/// it costs nothing while the agent runs.
private final class Watchdog: Sendable {
    private struct Armed {
        var deadline: ContinuousClock.Instant
        var reason: String
        var exitCode: Int32
    }

    private let armed = Mutex<Armed?>(nil)
    private let wake = DispatchSemaphore(value: 0)

    private let killChildren: @Sendable () -> Void

    init(killChildren: @escaping @Sendable () -> Void) {
        self.killChildren = killChildren
        let thread = Thread { [self] in run() }
        thread.name = "agent-shutdown-watchdog"
        thread.start()
    }

    private func run() {
        wake.wait()
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
            Thread.sleep(forTimeInterval: min(0.05, Double(remaining / .milliseconds(1)) / 1000))
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
        if !wasArmed { wake.signal() }
    }
}
