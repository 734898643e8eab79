import AgentCore
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import Synchronization

/// Which tool calls ran and what they answered, so that each runs at most once and a repeat
/// gets the same answer.
///
/// Memory: only each chat's latest message is kept; at most ``maxChats`` chats (the one
/// used longest ago goes first) and ``maxCallsPerMessage`` calls each; a recorded answer
/// keeps at most ``maxRecordedBody`` bytes (a longer one is replayed as a 500 saying so),
/// and all of them at most ``maxRecordedBytes``: past it the answers recorded first give up
/// their bodies (a repeat of such a call is a 500 saying so, never a second run).
final class ToolCallLedger: Sendable {
    static let maxChats = 256
    static let maxCallsPerMessage = 256
    static let maxRecordedBody = 1 << 20
    static let maxRecordedBytes = 64 << 20

    /// What a call whose answer gave up its body to the budget replays.
    static let unkept = Answer(
        status: .internalServerError, contentType: "application/json",
        body: Array(#"{"message":"The tool call ran; its answer is no longer kept."}"#.utf8))

    /// A finished call's answer.
    struct Answer: Sendable {
        var status: HTTPResponse.Status
        var contentType: String
        var body: [UInt8]
    }

    enum State: Sendable {
        case running(waiters: [UInt64: CheckedContinuation<Void, Never>])
        case done(Answer, inputHash: String)
        case canceled
    }

    struct Record: Sendable {
        var state: State
        var startedAt: ContinuousClock.Instant
        /// When its answer was recorded (the store's clock), for the byte budget.
        var finished: UInt64 = 0
    }

    private struct Chat {
        var message: UInt64
        var calls: [String: Record] = [:]
        var lastUsed: UInt64 = 0
    }

    private struct Store {
        var chats: [String: Chat] = [:]
        var clock: UInt64 = 0
        var nextWaiter: UInt64 = 0
        /// Bytes of the recorded answers' bodies (at most ``maxRecordedBytes``).
        var recordedBytes = 0
    }

    /// What a request for a call should do.
    enum Decision: Sendable {
        /// Run it: the first request for this call.
        case run
        /// It ran (or runs): wait for it if needed, then replay if the input is the same.
        case replay
        case stale
        case canceled
        case agentStartedAfterCall
    }

    let startedAt: ContinuousClock.Instant
    private let store = Mutex(Store())

    init(startedAt: ContinuousClock.Instant = .now) {
        self.startedAt = startedAt
    }

    /// Decides, and for `.run` records the call as running.
    func begin(_ key: ToolCallKey, ageMs: UInt64, now: ContinuousClock.Instant = .now) -> Decision {
        var woken: [CheckedContinuation<Void, Never>] = []
        defer { for waiter in woken { waiter.resume() } }
        return store.withLock { s in
            s.clock += 1
            var chat = s.chats[key.chat] ?? Chat(message: key.messageID)
            chat.lastUsed = s.clock
            defer { s.chats[key.chat] = chat; Self.trim(&s, waking: &woken) }
            if key.messageID < chat.message { return .stale }
            if key.messageID > chat.message {
                Self.forget(chat, from: &s, waking: &woken)
                chat = Chat(message: key.messageID, calls: [:], lastUsed: s.clock)
            }
            if let record = chat.calls[key.callID] {
                if case .canceled = record.state { return .canceled }
                return .replay
            }
            // No record: a call older than this agent may have run in a previous one.
            let uptime = now - startedAt
            // Clamped: the age is a client's number (up to 2^64 - 1, past Int64).
            if Duration.milliseconds(Int64(clamping: ageMs)) >= uptime - .seconds(2) { return .agentStartedAfterCall }
            guard chat.calls.count < Self.maxCallsPerMessage else { return .stale }
            chat.calls[key.callID] = Record(state: .running(waiters: [:]), startedAt: now)
            return .run
        }
    }

    /// Records the answer of a call that ran and wakes those waiting for it.
    func finish(_ key: ToolCallKey, answer: Answer, inputHash: String) {
        let waiters = store.withLock { s -> [CheckedContinuation<Void, Never>] in
            // A late answer of a message the chat has moved past is dropped, never recorded
            // over the newer message's call.
            guard var chat = s.chats[key.chat], chat.message == key.messageID, var record = chat.calls[key.callID] else { return [] }
            var woken: [CheckedContinuation<Void, Never>] = []
            if case .running(let waiters) = record.state { woken = Array(waiters.values) }
            if case .done(let old, _) = record.state { s.recordedBytes -= old.body.count }
            s.clock += 1
            record.state = .done(answer, inputHash: inputHash)
            record.finished = s.clock
            chat.calls[key.callID] = record
            s.chats[key.chat] = chat
            s.recordedBytes += answer.body.count
            Self.keepWithinBudget(&s)
            return woken
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Waits until the call is no longer running (or the task is cancelled), then returns
    /// its record.
    func settled(_ key: ToolCallKey) async -> Record? {
        let id = store.withLock { s -> UInt64 in
            s.nextWaiter += 1
            return s.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = store.withLock { s -> Bool in
                    guard var chat = s.chats[key.chat], chat.message == key.messageID, var record = chat.calls[key.callID],
                        case .running(var waiters) = record.state, !Task.isCancelled
                    else { return true }
                    waiters[id] = continuation
                    record.state = .running(waiters: waiters)
                    chat.calls[key.callID] = record
                    s.chats[key.chat] = chat
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = store.withLock { s -> CheckedContinuation<Void, Never>? in
                guard var chat = s.chats[key.chat], var record = chat.calls[key.callID],
                    case .running(var waiters) = record.state, let waiter = waiters.removeValue(forKey: id)
                else { return nil }
                record.state = .running(waiters: waiters)
                chat.calls[key.callID] = record
                s.chats[key.chat] = chat
                return waiter
            }
            waiter?.resume()
        }
        return store.withLock { s in
            guard let chat = s.chats[key.chat], chat.message == key.messageID else { return nil }
            return chat.calls[key.callID]
        }
    }

    /// Cancels a call: one never received is recorded as canceled; returns the record as
    /// it was (nil: never received).
    func cancel(_ key: ToolCallKey, now: ContinuousClock.Instant = .now) -> Record? {
        var woken: [CheckedContinuation<Void, Never>] = []
        defer { for waiter in woken { waiter.resume() } }
        return store.withLock { s in
            s.clock += 1
            var chat = s.chats[key.chat] ?? Chat(message: key.messageID)
            if key.messageID > chat.message {
                Self.forget(chat, from: &s, waking: &woken)
                chat = Chat(message: key.messageID)
            }
            chat.lastUsed = s.clock
            defer { s.chats[key.chat] = chat; Self.trim(&s, waking: &woken) }
            guard key.messageID == chat.message else { return nil }
            if let record = chat.calls[key.callID] { return record }
            chat.calls[key.callID] = Record(state: .canceled, startedAt: now)
            return nil
        }
    }

    /// Whether anyone waits for `key`'s running call (tests).
    /// Whether any chat has a record of the call `callID` (running or settled).
    func knows(callID: String) -> Bool {
        store.withLock { s in s.chats.values.contains { $0.calls[callID] != nil } }
    }

    func hasWaiters(_ key: ToolCallKey) -> Bool {
        store.withLock { s in
            guard let record = s.chats[key.chat]?.calls[key.callID], case .running(let waiters) = record.state else { return false }
            return !waiters.isEmpty
        }
    }

    /// Drops the least recently used chats beyond ``maxChats``.
    private static func trim(_ s: inout Store, waking woken: inout [CheckedContinuation<Void, Never>]) {
        while s.chats.count > maxChats, let oldest = s.chats.min(by: { $0.value.lastUsed < $1.value.lastUsed }) {
            forget(oldest.value, from: &s, waking: &woken)
            s.chats.removeValue(forKey: oldest.key)
        }
    }

    /// A chat's records are dropped (a newer message, or trimming): their answers leave the
    /// budget; those waiting for its running calls are woken, outside the lock, and find no
    /// record.
    private static func forget(_ chat: Chat, from s: inout Store, waking woken: inout [CheckedContinuation<Void, Never>]) {
        for record in chat.calls.values {
            switch record.state {
            case .running(let waiters): woken += waiters.values
            case .done(let answer, _): s.recordedBytes -= answer.body.count
            case .canceled: break
            }
        }
    }

    /// Past ``maxRecordedBytes``, the answers recorded first give up their bodies (each
    /// keeps its input's hash: a repeat is answered ``unkept``, never run again).
    private static func keepWithinBudget(_ s: inout Store) {
        // Bounded: each turn takes one answer's bytes out of the total.
        while s.recordedBytes > maxRecordedBytes {
            var oldest: (chat: String, call: String, finished: UInt64)?
            for (chatID, chat) in s.chats {
                for (callID, record) in chat.calls {
                    // Only a body larger than the note that replaces it frees anything.
                    guard case .done(let answer, _) = record.state, answer.body.count > unkept.body.count else { continue }
                    if record.finished < oldest?.finished ?? .max { oldest = (chatID, callID, record.finished) }
                }
            }
            guard let oldest, var record = s.chats[oldest.chat]?.calls[oldest.call], case .done(let answer, let input) = record.state else { return }
            s.recordedBytes -= answer.body.count - unkept.body.count
            record.state = .done(unkept, inputHash: input)
            s.chats[oldest.chat]?.calls[oldest.call] = record
        }
    }

    /// Bytes of the recorded answers' bodies now (tests).
    var recordedBytes: Int { store.withLock { $0.recordedBytes } }

}
