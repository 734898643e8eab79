import AgentCore
import Metrics
import Synchronization

/// The monitor's `statfs` calls, kept off Swift's cooperative threads: each runs on a thread
/// of ``sharedPool``, and a collection waits for the answers only until its deadline, or
/// until its task is cancelled (the session ended), never longer.
///
/// `statfs` on a dead hard-mounted NFS server blocks in the kernel, uninterruptibly, for as
/// long as the server is away: nothing can cancel it. So a volume whose call has not
/// returned is not asked again until it does (each later collection reports it as
/// unreadable at once), and the answer of a call its collection no longer waits for is
/// dropped. The calls outstanding are remembered for the monitor's life, across sessions:
/// a reconnect does not ask a dead mount again either.
///
/// Bound: at most one call per volume path outstanding (queued or running), so a dead
/// mount holds at most one thread: the threads stuck are at most the dead mounts among the
/// volumes monitored (16 at most a plan), and never more than the pool's 4 threads; at most
/// ``ResourcesMonitorPlan/maxVolumes`` (16) calls wait in the pool's queue (more are refused
/// and reported as unreadable). Memory: one entry per outstanding path.
final class VolumeReads: Sendable {
    /// The `statfs` threads of every monitor (the agent has one). 4 wide: the few volumes a
    /// template monitors (home, `/`, a data disk) are read side by side, and up to 3 dead
    /// mounts still leave a thread for the others. With all 4 held, nothing more is stuck:
    /// the other volumes' calls wait in the queue (each volume reported as unreadable
    /// meanwhile) until a thread is free. Threads start only when calls overlap, and stay
    /// for the process.
    static let sharedPool = BlockingPool(name: "statfs", threads: 4, maxQueued: ResourcesMonitorPlan.maxVolumes)

    typealias Answer = Result<ResourcesDatapoint.Usage, DiskError>

    /// One collection's calls: the paths it still waits for and the answers that came.
    private struct Round {
        var awaiting: Set<String> = []
        var answers: [String: Answer] = [:]
        /// The collection waiting for its last answer.
        var waiter: CheckedContinuation<Void, Never>?
    }

    private struct State {
        /// Paths whose call was handed to the pool and has not returned (queued or running).
        var outstanding: Set<String> = []
        /// Collections still waiting, by number: one removed stops waiting, and answers for
        /// it are dropped.
        var collections: [UInt64: Round] = [:]
        var nextCollection: UInt64 = 0
        /// Collections done (tests wait on it).
        var finished = 0

        /// Records `answer` for collection `id`; its waiter when that was the last answer.
        mutating func deliver(_ answer: Answer, path: String, to id: UInt64) -> CheckedContinuation<Void, Never>? {
            guard var collection = collections.removeValue(forKey: id) else { return nil }
            defer { collections[id] = collection }
            collection.answers[path] = answer
            _ = collection.awaiting.remove(path)
            guard collection.awaiting.isEmpty else { return nil }
            defer { collection.waiter = nil }
            return collection.waiter
        }
    }

    private let state = Mutex(State())
    private let pool: BlockingPool
    /// `agent_resources_monitor_volume_reads_skipped_total{reason}`: `timeout` (no answer
    /// by the collection's deadline: the call is stuck until it returns), `stuck` (an
    /// earlier call has not returned: none made), `busy` (the pool's queue was full).
    private let timeouts = Counter(label: "agent_resources_monitor_volume_reads_skipped_total", dimensions: [("reason", "timeout")])
    private let stuck = Counter(label: "agent_resources_monitor_volume_reads_skipped_total", dimensions: [("reason", "stuck")])
    private let busy = Counter(label: "agent_resources_monitor_volume_reads_skipped_total", dimensions: [("reason", "busy")])
    /// `agent_resources_monitor_volume_reads_outstanding`: calls made and not returned.
    private let outstandingGauge = Gauge(label: "agent_resources_monitor_volume_reads_outstanding")

    init(pool: BlockingPool = VolumeReads.sharedPool) {
        self.pool = pool
    }

    /// Paths whose call has not returned (queued or running).
    var outstanding: Set<String> { state.withLock { $0.outstanding } }

    /// Collections done.
    var finished: Int { state.withLock { $0.finished } }

    /// Reads each of `paths` once with `statfs` on the pool and waits for the answers until
    /// `budget` has passed on `clock`, or the calling task is cancelled, whichever comes
    /// first. A path with no answer then is a failure: ``VolumeReadFailure/noAnswer(_:)``
    /// (this collection's call), ``VolumeReadFailure/stillRunning`` (an earlier call, not
    /// made again) or ``VolumeReadFailure/busy``.
    func read<C: Clock>(
        _ paths: [String], within budget: Duration, on clock: C,
        with statfs: @escaping @Sendable (String) -> Answer
    ) async -> [String: Result<ResourcesDatapoint.Usage, VolumeReadFailure>] where C.Duration == Duration {
        let deadline = clock.now.advanced(by: budget)
        let id = state.withLock { s -> UInt64 in
            s.nextCollection += 1
            s.collections[s.nextCollection] = Round()
            return s.nextCollection
        }
        var results: [String: Result<ResourcesDatapoint.Usage, VolumeReadFailure>] = [:]
        var made: [String] = []
        for path in paths where results[path] == nil && !made.contains(path) {
            let free = state.withLock { s -> Bool in
                guard s.outstanding.insert(path).inserted else { return false }
                _ = s.collections[id]?.awaiting.insert(path)
                outstandingGauge.record(s.outstanding.count)
                return true
            }
            guard free else {
                stuck.increment()
                results[path] = .failure(.stillRunning)
                continue
            }
            guard pool.submit({ [self] in call(path, for: id, statfs) }) else {
                state.withLock { s in
                    _ = s.outstanding.remove(path)
                    _ = s.collections[id]?.awaiting.remove(path)
                    outstandingGauge.record(s.outstanding.count)
                }
                busy.increment()
                results[path] = .failure(.busy)
                continue
            }
            made.append(path)
        }
        let answers: [String: Answer]
        if made.isEmpty {
            answers = close(id)
        } else {
            answers = await withTaskGroup(of: Void.self, returning: [String: Answer].self) { group in
                group.addTask { await self.answered(id) }
                group.addTask { try? await clock.sleep(until: deadline, tolerance: nil) }
                await group.next()
                group.cancelAll()
                // Resumes `answered` when the deadline or a cancellation came first.
                return close(id)
            }
        }
        let cancelled = Task.isCancelled
        for path in made {
            switch answers[path] {
            case .success(let usage)?: results[path] = .success(usage)
            case .failure(let error)?: results[path] = .failure(.statfs(error))
            case nil:
                if !cancelled { timeouts.increment() }
                results[path] = .failure(.noAnswer(budget))
            }
        }
        return results
    }

    /// On a pool thread: the call, unless its collection stopped waiting before a thread
    /// was free; then the path is free again, and the answer goes to the collection if it
    /// still waits (in the same step, so a collection that saw the answer never sees the
    /// path outstanding).
    private func call(_ path: String, for id: UInt64, _ statfs: @Sendable (String) -> Answer) {
        let wanted = state.withLock { $0.collections[id] != nil }
        let answer: Answer? = wanted ? statfs(path) : nil
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            _ = s.outstanding.remove(path)
            outstandingGauge.record(s.outstanding.count)
            guard let answer else { return nil }
            return s.deliver(answer, path: path, to: id)
        }
        waiter?.resume()
    }

    /// Returns once collection `id` has every answer, or has stopped waiting.
    private func answered(_ id: UInt64) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waiting = state.withLock { s -> Bool in
                guard s.collections[id]?.awaiting.isEmpty == false else { return false }
                s.collections[id]?.waiter = continuation
                return true
            }
            if !waiting { continuation.resume() }
        }
    }

    /// Stops collection `id` waiting; the answers that came.
    private func close(_ id: UInt64) -> [String: Answer] {
        let collection = state.withLock { s -> Round? in
            s.finished += 1
            return s.collections.removeValue(forKey: id)
        }
        collection?.waiter?.resume()
        return collection?.answers ?? [:]
    }
}

/// Why a volume has no figure in a datapoint (logged, as the reference logs a failed read,
/// and left out of the datapoint).
enum VolumeReadFailure: Error, Equatable, CustomStringConvertible {
    /// `statfs` failed.
    case statfs(DiskError)
    /// `statfs` did not answer within the collection's deadline; its answer is dropped.
    case noAnswer(Duration)
    /// An earlier `statfs` of the volume has not returned: not asked again until it does.
    case stillRunning
    /// The pool's queue was full.
    case busy

    var description: String {
        switch self {
        case .statfs(let error): "\(error)"
        case .noAnswer(let budget): "statfs did not answer within \(budget)"
        case .stillRunning: "an earlier statfs has not returned (the file system does not answer); not asked again until it does"
        case .busy: "too many statfs calls waiting"
        }
    }
}
