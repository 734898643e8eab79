import AgentCore
@testable import AgentFiles
import Synchronization
import Testing

/// The ledger wakes whoever waits for a running call whenever it drops that call's record.
@Suite(.timeLimit(.minutes(3)))
struct ToolCallLedgerTests {
    static func key(message: UInt64, call: String) -> ToolCallKey {
        ToolCallKey(chat: "3f2e1d0c-9b8a-4765-8432-10fedcba9876", messageID: message, callID: call)
    }

    /// A repeat waiting for a running call, then the chat's next message (by a new call or
    /// by a cancel): the waiter is woken and finds no record, instead of waiting forever.
    @Test func aNewerMessageWakesThoseWaitingForItsRunningCalls() async throws {
        for newerByCancel in [false, true] {
            let ledger = ToolCallLedger(startedAt: .now - .seconds(60))
            let running = Self.key(message: 1, call: "slow")
            #expect(ledger.begin(running, ageMs: 10) == .run)
            #expect(ledger.begin(running, ageMs: 10) == .replay)
            let waiting = Task { await ledger.settled(running) }
            // Until the waiter is registered (bounded: 2 s).
            for _ in 0..<200 where !ledger.hasWaiters(running) { try await Task.sleep(for: .milliseconds(10)) }
            #expect(ledger.hasWaiters(running))
            if newerByCancel {
                _ = ledger.cancel(Self.key(message: 2, call: "other"))
            } else {
                #expect(ledger.begin(Self.key(message: 2, call: "other"), ageMs: 10) == .run)
            }
            // Woken within 5 s, or the test fails rather than hang (a waiter nobody wakes
            // cannot be reached any more, so it is left behind).
            let woken = Mutex<ToolCallLedger.Record??>(nil)
            Task {
                let record = await waiting.value; woken.withLock { $0 = .some(record) }
            }
            for _ in 0..<500 where woken.withLock({ $0 == nil }) { try await Task.sleep(for: .milliseconds(10)) }
            let outcome = woken.withLock { $0 }
            #expect(outcome != nil, newerByCancel ? "woken after a cancel of a newer message" : "woken after a newer message")
            if let record = outcome { #expect(record == nil, "no record is left for the dropped call") }
        }
    }
}
