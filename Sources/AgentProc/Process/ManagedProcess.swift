import CoreMetrics
import FoundationEssentials
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One process started through the API: its identity, its head/tail output, its exit,
/// the requests waiting for that exit, and its live stream subscribers.
///
/// All mutable state sits behind one lock so that "state, then output" snapshots and
/// "snapshot, then subscribe" are atomic with respect to the reactor's writes.
public final class ManagedProcess: Sendable {
    /// Most concurrent stream subscribers per process.
    public static let maxSubscribers = 16

    public let id: String
    public let command: String
    /// The resolved working directory ("" means the agent's own).
    public let workdir: String
    public let background: Bool
    /// Canonical chat id, or nil for a process started without a chat.
    public let chatID: String?
    /// The shell's pid, which is also its process group id.
    public let pid: Int32
    /// Unix seconds.
    public let startedAtUnix: Int64
    /// Monotonic start time, for ordering ties deterministically.
    let startedAt: ContinuousClock.Instant

    struct Exit: Sendable {
        var status: ExitStatus
        var exitedAtUnix: Int64
        var exitedAt: ContinuousClock.Instant
    }

    private struct State {
        var output = HeadTail()
        var exit: Exit?
        var outputOpen = true
        var reactorToken: UInt64?
        var exitWaiters: [UInt64: @Sendable () -> Void] = [:]
        var subscribers: [UInt64: OutputSubscription] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())
    /// Shared by every process of one manager: the bound on all subscribers together.
    private let budget: SubscriberBudget
    /// Told (on the reactor thread) once the process has exited and its state is final.
    private let exitObserver: (@Sendable (ManagedProcess) -> Void)?

    init(
        id: String, command: String, workdir: String, background: Bool, chatID: String?, pid: Int32,
        budget: SubscriberBudget, exitObserver: (@Sendable (ManagedProcess) -> Void)? = nil
    ) {
        self.budget = budget
        self.exitObserver = exitObserver
        self.id = id
        self.command = command
        self.workdir = workdir
        self.background = background
        self.chatID = chatID
        self.pid = pid
        self.startedAtUnix = Int64(Date().timeIntervalSince1970)
        self.startedAt = .now
    }

    /// A consistent view: state is read together with output, so `running == false`
    /// means the shell's output is final.
    public struct Snapshot: Sendable {
        public var running: Bool
        public var exit: ExitStatus?
        public var exitedAtUnix: Int64?
        public var output: [UInt8]
        public var truncation: OutputTruncation?
    }

    public var isRunning: Bool { state.withLock { $0.exit == nil } }

    var exitInfo: Exit? { state.withLock { $0.exit } }

    /// True while some process (the shell or an orphan) still holds the output pipe.
    var isOutputOpen: Bool { state.withLock { $0.outputOpen } }

    var reactorToken: UInt64? {
        get { state.withLock { $0.reactorToken } }
        set { state.withLock { $0.reactorToken = newValue } }
    }

    public func snapshot() -> Snapshot {
        // Copy the store under the lock (copy-on-write: O(1)) and render outside it.
        let (store, exit) = state.withLock { ($0.output, $0.exit) }
        let rendered = store.output()
        return Snapshot(
            running: exit == nil, exit: exit?.status, exitedAtUnix: exit?.exitedAtUnix,
            output: rendered.bytes, truncation: rendered.truncation)
    }

    /// Registers `body` to run once at exit; returns nil (and does not register) if the
    /// process has already exited.
    func onExit(_ body: @escaping @Sendable () -> Void) -> UInt64? {
        state.withLock { s -> UInt64? in
            guard s.exit == nil else { return nil }
            s.nextID += 1
            s.exitWaiters[s.nextID] = body
            return s.nextID
        }
    }

    func removeExitWaiter(_ id: UInt64) {
        _ = state.withLock { $0.exitWaiters.removeValue(forKey: id) }
    }

    /// Why a subscription was refused.
    enum SubscribeRefusal: Error {
        /// ``maxSubscribers`` are attached to this process.
        case processFull
        /// The manager's ``SubscriberBudget/maxSubscribers`` are attached in all.
        case allFull
    }

    /// The retained output so far (raw, unrendered), and a subscription for what follows.
    func subscribe() throws(SubscribeRefusal) -> (head: [UInt8], omitted: Int, tail: [UInt8], subscription: OutputSubscription) {
        let subscription = OutputSubscription(budget: budget)
        return try state.withLock { s throws(SubscribeRefusal) in
            guard s.subscribers.count < Self.maxSubscribers else { throw .processFull }
            if let exit = s.exit {
                subscription.finish(exit.status)
            } else {
                guard budget.admit() else { throw .allFull }
                s.nextID += 1
                s.subscribers[s.nextID] = subscription
            }
            return (s.output.headBytes, s.output.omittedCount, s.output.tailBytes, subscription)
        }
    }

    /// Detaches a subscriber (its WebSocket closed) and frees what it had queued.
    func unsubscribe(_ subscription: OutputSubscription) {
        subscription.cancel()
        let removed = state.withLock { s -> Bool in
            guard let key = s.subscribers.first(where: { $0.value === subscription })?.key else { return false }
            s.subscribers[key] = nil
            return true
        }
        if removed { budget.leave() }
    }

    var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Requests currently blocked in `wait=true` (for tests and diagnostics).
    var exitWaiterCount: Int { state.withLock { $0.exitWaiters.count } }
}

extension ManagedProcess: ProcessEventSink {
    func output(_ bytes: UnsafeRawBufferPointer) {
        ProcessMetrics.outputBytes.increment(by: bytes.count)
        state.withLock { s in
            s.output.write(bytes)
            if !s.subscribers.isEmpty {
                // One copy, shared by every subscriber, in pieces of one WebSocket message
                // (uniform sizes the allocator reuses; a message in flight pins only itself).
                var offset = 0
                while offset < bytes.count {
                    let end = min(offset + OutputSubscription.maxBatchBytes, bytes.count)
                    let chunk = ByteBuffer(bytes: UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
                    for subscriber in s.subscribers.values { subscriber.push(chunk) }
                    offset = end
                }
            }
        }
    }

    func discardUnretained(_ discard: (_ keep: Int) -> Int) {
        state.withLock { s in
            guard s.subscribers.isEmpty, s.output.isHeadFull else { return }
            let dropped = discard(s.output.tailCapacity)
            guard dropped > 0 else { return }
            s.output.skip(dropped)
            ProcessMetrics.outputBytes.increment(by: dropped)
        }
    }

    func outputClosed() {
        state.withLock { $0.outputOpen = false }
    }

    func exited(waitStatus: Int32) {
        let status = ExitStatus(waitStatus: waitStatus)
        let (waiters, subscribers) = state.withLock { s -> ([@Sendable () -> Void], [OutputSubscription]) in
            s.exit = Exit(status: status, exitedAtUnix: Int64(Date().timeIntervalSince1970), exitedAt: .now)
            defer {
                s.exitWaiters.removeAll()
                s.subscribers.removeAll()
            }
            return (Array(s.exitWaiters.values), Array(s.subscribers.values))
        }
        exitObserver?(self)
        for subscriber in subscribers {
            subscriber.finish(status)
            budget.leave()
        }
        for waiter in waiters { waiter() }
    }
}
