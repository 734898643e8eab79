import AgentCore
@testable import AgentFiles
import HTTPTypes
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
    /// The recorded answers are bounded in bytes together: past the budget the answers
    /// recorded first give up their bodies and a repeat of one is answered "no longer kept",
    /// never run again; dropping a chat's message gives its bytes back.
    @Test func recordedAnswersAreBoundedInBytes() async throws {
        let ledger = ToolCallLedger(startedAt: .now - .seconds(60))
        let big = ToolCallLedger.Answer(status: .ok, contentType: "application/json", body: [UInt8](repeating: 0x61, count: 1 << 20))
        let calls = ToolCallLedger.maxRecordedBytes / (1 << 20) + 8
        for i in 0..<calls {
            let key = Self.key(message: 1, call: "call-\(i)")
            #expect(ledger.begin(key, ageMs: 10) == .run)
            ledger.finish(key, answer: big, inputHash: "input-\(i)")
            #expect(ledger.recordedBytes <= ToolCallLedger.maxRecordedBytes)
        }
        guard case .done(let first, let input)? = await ledger.settled(Self.key(message: 1, call: "call-0"))?.state else {
            Issue.record("the first call's record is gone")
            return
        }
        #expect(first.body == ToolCallLedger.unkept.body && input == "input-0", "the oldest gave up its body, kept its input")
        #expect(ledger.begin(Self.key(message: 1, call: "call-0"), ageMs: 10) == .replay, "a repeat is replayed, not run")
        guard case .done(let last, _)? = await ledger.settled(Self.key(message: 1, call: "call-\(calls - 1)"))?.state else {
            Issue.record("the last call's record is gone")
            return
        }
        #expect(last.body.count == 1 << 20, "the newest keeps its answer")
        // The chat's next message drops its records: their bytes go back.
        #expect(ledger.begin(Self.key(message: 2, call: "next"), ageMs: 10) == .run)
        #expect(ledger.recordedBytes == 0)
    }
}
