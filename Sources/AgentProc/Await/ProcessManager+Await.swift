import AgentCore
import NIOCore
import Synchronization

/// Which condition ended an await (`"condition"` in the answer).
public enum AwaitCondition: String, Sendable {
    case matched
    case portOpen = "port_open"
    case exited
    case timeout
}

/// Why an await was not started (429).
public enum AwaitRefusal: Error, Equatable {
    /// ``ManagedProcess/maxWatches`` awaits match this process's output already.
    case processFull
    /// ``ProcessManager/Configuration/maxAwaits`` awaits wait for output or a port in all.
    case allFull
}

extension ProcessManager {
    /// Most awaits on a line or a port at once, over all processes, unless configured
    /// otherwise (an await on output holds at most a line of 64 KiB and 1 MiB of output
    /// arriving during its catch-up; one on a port probes it every ``PortProbe/interval``).
    public static let defaultMaxAwaits = 256

    /// What an await asks for: a line condition from an offset, a port, or both (the first
    /// to hold ends it), and how long to wait at most.
    public struct AwaitRequest: Sendable {
        public var condition: LineCondition?
        public var from: UInt64 = 0
        public var port: UInt16?
        public var timeout: Duration

        public init(condition: LineCondition? = nil, from: UInt64 = 0, port: UInt16? = nil, timeout: Duration) {
            self.condition = condition
            self.from = from
            self.port = port
            self.timeout = timeout
        }
    }

    /// Waits until a line of the process's output (from `from` on) satisfies the condition,
    /// the port accepts a connection, the process exits, `timeout` passes or the client goes
    /// (answered as `timeout`). Output is handed to the match pool as the reactor reads it
    /// (``OutputWatch``); output written before the await is read back from the spool first.
    public func awaitCondition(
        _ process: ManagedProcess, _ request: AwaitRequest, clientGone: any GoneSignal, timerLoop: any EventLoop
    ) async throws(AwaitRefusal) -> (AwaitCondition, OutputWatch.Match?) {
        let signal = OneShotSignal()
        var watch: OutputWatch?
        var watchTask: Task<Void, Never>?
        // One charge per await on a line, a port or both (an exit wait with a timeout is not
        // charged, as `wait=true` is not).
        let charged = request.condition != nil || request.port != nil
        if charged {
            guard activeAwaits.add(1, upTo: configuration.maxAwaits) != nil else { throw .allFull }
        }
        defer { if charged { activeAwaits.subtract(1, ordering: .relaxed) } }
        let from = min(request.from, process.outputEnd)
        let made = request.condition.map { OutputWatch(condition: $0, from: from) }
        // Armed first, so they bound the catch-up too; each stops the watch's matching.
        let client = clientGone.whenGone {
            made?.stop()
            signal.fire()
        }
        defer { client.cancel() }
        let limit = min(request.timeout, configuration.maxWait)
        let nanoseconds = limit.components.seconds * 1_000_000_000 + limit.components.attoseconds / 1_000_000_000
        let timer = timerLoop.scheduleTask(in: .nanoseconds(nanoseconds)) {
            made?.stop()
            signal.fire()
        }
        defer { timer.cancel() }
        if let made {
            watch = made
            guard let (catchUpTo, complete, head, tail) = process.attach(made) else { throw .processFull }
            // Read back and matched on the match pool, not on this request's event loop: a
            // costly pattern over 8 MiB of spool must not hold the loop's other connections.
            let spool = process.spool
            // The pool refuses only past its bounds, which the awaits' cap keeps it under; the
            // timeout and the client's going stop the watch, which ends the catch-up at its next
            // line.
            _ = try? await OutputWatch.pool.run { _ in
                if let spool {
                    // What the spool dropped at its start the head kept in memory still holds
                    // (up to 16 KiB): matched first, as `/output` shows it.
                    let dropped = spool.dropped
                    let headEnd = min(UInt64(head.count), dropped)
                    if from < headEnd { made.catchUp(Array(head[Int(from)..<Int(headEnd)]), at: from) }
                    var offset = max(from, dropped)
                    while offset < catchUpTo, !made.isStopped {
                        let read = spool.read(from: offset, limit: min(1 << 20, Int(catchUpTo - offset)))
                        guard !read.bytes.isEmpty else { break }
                        made.catchUp(read.bytes, at: read.offset)
                        offset = read.next
                    }
                } else {
                    // No spool: the head and tail kept in memory (what lies between is gone).
                    for (bytes, start) in [(head, UInt64(0)), (tail, catchUpTo - UInt64(tail.count))] where !bytes.isEmpty {
                        let end = start + UInt64(bytes.count)
                        guard end > from else { continue }
                        let skip = from > start ? Int(from - start) : 0
                        made.catchUp(Array(bytes[skip...]), at: start + UInt64(skip))
                    }
                }
            }
            made.endCatchUp()
            if complete { made.outputEnded() }
            watchTask = Task {
                await made.matched.wait()
                signal.fire()
            }
        }
        defer {
            watchTask?.cancel()
            if let watch {
                process.detach(watch)
                watch.stop()  // a drain under way ends at its next line
                watch.matched.fire()  // ends the watch task
            }
        }
        // An exit ends the await once the output before it is matched (the reactor reports
        // the exit after the last output, which the watch may still be matching).
        let watching = watch
        let exited: @Sendable () -> Void = {
            guard let watching else { return signal.fire() }
            Task {
                await watching.matchedSoFar()
                signal.fire()
            }
        }
        let exitWaiter = process.onExit(exited)
        defer { if let exitWaiter { process.removeExitWaiter(exitWaiter) } }
        if exitWaiter == nil { exited() }

        let portOpen = OneShotSignal()
        var portTask: Task<Void, Never>?
        if let port = request.port {
            portTask = Task.detached {
                while !Task.isCancelled {
                    if await PortProbe.probe(port) {
                        portOpen.fire()
                        signal.fire()
                        return
                    }
                    try? await Task.sleep(for: PortProbe.interval)
                }
            }
        }
        defer { portTask?.cancel() }
        await signal.wait()

        let outcome: (AwaitCondition, OutputWatch.Match?)
        if let match = watch?.match {
            outcome = (.matched, match)
        } else if portOpen.isFired {
            outcome = (.portOpen, nil)
        } else if !process.isRunning {
            outcome = (.exited, nil)
        } else {
            outcome = (.timeout, nil)
        }
        ProcessMetrics.awaited(outcome.0.rawValue)
        return outcome
    }
}
