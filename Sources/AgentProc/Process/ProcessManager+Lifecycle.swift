import AgentCore
import AgentHTTP
import CoreMetrics
import FoundationEssentials
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Waiting for and signalling processes, and the service's run and shutdown.
extension ProcessManager {
    /// Returns when the process exits, `clientGone` reports, `maxWait` passes, or the
    /// task is cancelled, whichever is first. Never throws: the caller answers with a snapshot.
    /// Every registration it makes (exit, client, timer on `timerLoop`, the connection's
    /// loop: no task to create and cancel per request) is withdrawn when it returns.
    public func waitForExit(_ process: ManagedProcess, clientGone: any GoneSignal, timerLoop: any EventLoop) async {
        let signal = OneShotSignal()
        guard let waiterID = process.onExit({ signal.fire() }) else { return }
        defer { process.removeExitWaiter(waiterID) }
        let client = clientGone.whenGone { signal.fire() }
        defer { client.cancel() }
        let maxWait = configuration.maxWait
        let nanoseconds = maxWait.components.seconds * 1_000_000_000 + maxWait.components.attoseconds / 1_000_000_000
        let timer = timerLoop.scheduleTask(in: .nanoseconds(nanoseconds)) { signal.fire() }
        defer { timer.cancel() }
        await signal.wait()
    }

    /// Sends the signal to the whole process group, if the agent still owns it.
    public func signal(_ process: ManagedProcess, _ name: SignalName) throws(SignalFailure) {
        guard process.isRunning else { throw SignalFailure.notRunning }
        guard let token = process.reactorToken else {
            // A start under way: the process is listed a moment before the watcher has it (so
            // its exit always finds it listed), and a 409 here answered a running process. Its
            // shell is an owned child: signalled with its group only while it is unreaped
            // (``OwnedChildren`` checks under its lock, so a reused pid is never reached).
            guard process.pid > 0, OwnedChildren.signal(process.pid, name.number, group: true) else {
                throw SignalFailure.notRunning
            }
            return
        }
        let code = watcher.signalGroup(token, name.number)
        // ESRCH: the group is gone, the exit is simply not processed yet.
        if code == ESRCH { throw SignalFailure.notRunning }
        if code != 0 {
            throw SignalFailure.failed("kill process group \(process.pid): \(SystemCallError.message(code))")
        }
    }

    /// SIGKILL to every process group and adopted orphan the agent still owns, and, in the
    /// daemon (the subreaper), to every child of the agent, at once (the shutdown
    /// watchdog's last step). Safe from any thread; never waits for the reactor's lock.
    public func killOwnedGroupsNow() {
        watcher.killAllIfPossible()
    }

    // MARK: Lifecycle

    public func run() async throws {
        let interval = configuration.reapInterval
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do { try await Task.sleep(for: interval) } catch { break }
                self.reap()
            }
        }
        await shutdown()
    }

    /// Refuses new starts, then terminates every process group the agent still owns:
    /// SIGTERM, up to `shutdownGrace` for them to exit, SIGKILL for the rest, then at most
    /// ``killWait`` more. Groups of shells that already exited are signalled too while a
    /// member is left (so background grandchildren do not survive the agent), but never once
    /// their id may belong to someone else (see ``ProcessWatcher``).
    public func shutdown() async {
        // Run detached from the caller's cancellation so the grace period really elapses.
        await Task { await self.terminateAll() }.value
    }

    private func terminateAll() async {
        let processes = state.withLock { s -> [ManagedProcess]? in
            s.closed = true
            guard !s.shutdownStarted else { return nil }
            s.shutdownStarted = true
            return Array(s.processes.values)
        }
        guard let processes else { return }
        let signalled = watcher.signalAll(SIGTERM)
        if signalled > 0 {
            logger.info("terminating process groups", metadata: ["count": "\(signalled)"])
        }
        if await !waitUntilQuiet(processes, within: configuration.shutdownGrace) {
            watcher.signalAll(SIGKILL)
            _ = await waitUntilQuiet(processes, within: Self.killWait)
        }
        await watcher.stop()
        await remover.flush()
        if let privateDirectory {
            for id in spools?.storedIDs() ?? [] { spools?.remove(id: id) }
            unlink(privateDirectory + "/" + ToolCallStarts.fileName)
            unlink(privateDirectory + "/" + ProcessLog.fileName)
            rmdir(privateDirectory + "/spool")
            rmdir(privateDirectory)
        }
    }

    /// After SIGKILL, how long the kernel gets to end the groups and close their pipes
    /// (a pipe still held then, by a process that left its group, is closed by us).
    static let killWait: Duration = .milliseconds(500)

    /// Polls (every 10 ms, bounded by `within`) until the agent owns no group or orphan and
    /// no pipe is open.
    private func waitUntilQuiet(_ processes: [ManagedProcess], within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        func quiet() -> Bool {
            watcher.ownedCount == 0 && processes.allSatisfy { !$0.isRunning && !$0.isOutputOpen }
        }
        while ContinuousClock.now < deadline {
            if quiet() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return quiet()
    }
}
