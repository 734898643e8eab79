import Testing

@testable import Scripts
import AgentTestSupport

@Suite(.ownThreads) struct LogRecordTests {
    let source: [UInt8] = Array(0..<16)

    @Test func roundTrip() throws {
        for output in ["", "hello", "😀 héllo ❌", String(repeating: "x", count: 70_000)] {
            for level in [LogRecord.levelInfo, LogRecord.levelError, LogRecord.levelWarn] {
                let record = LogRecord(sourceID: source, level: level, createdAt: -1_234_567_890_123, output: output)
                let encoded = record.encode()
                #expect(encoded.count == LogRecord.headerBytes + output.utf8.count)
                #expect(try LogRecord(decoding: encoded) == record)
                #expect(try LogRecord(decoding: encoded[...]) == record)
            }
        }
        let max = LogRecord(sourceID: source, level: 5, createdAt: .max, output: "m")
        #expect(try LogRecord(decoding: max.encode()) == max)
    }

    @Test func garbage() {
        let good = LogRecord(sourceID: source, level: 3, createdAt: 42, output: "ok").encode()
        #expect(throws: LogRecord.DecodingError.tooShort(0)) { try LogRecord(decoding: []) }
        #expect(throws: LogRecord.DecodingError.tooShort(25)) { try LogRecord(decoding: good[0..<25]) }
        var badVersion = good
        badVersion[0] = 9
        #expect(throws: LogRecord.DecodingError.unknownVersion(9)) { try LogRecord(decoding: badVersion) }
        #expect(throws: LogRecord.DecodingError.invalidUTF8) { try LogRecord(decoding: good + [0xFF]) }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            var input = (0..<Int.random(in: 0...60, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if Bool.random(using: &generator), !input.isEmpty { input[0] = 1 }
            _ = try? LogRecord(decoding: input)
        }
    }

    @Test func batching() {
        let other: [UInt8] = Array(repeating: 7, count: 16)
        func record(_ bytes: Int, _ id: [UInt8]) -> [UInt8] {
            LogRecord(sourceID: id, level: 3, createdAt: 0, output: String(repeating: "a", count: bytes)).encode()
        }
        #expect(LogBatching.sameSourcePrefix([[UInt8]](), budget: 100).count == 0)
        #expect(LogBatching.sameSourcePrefix([record(10, source), record(10, source), record(10, other)], budget: 1000).count == 2)
        // 31 + 31 + 31 = 93 ≤ 93; a fourth would pass it.
        #expect(LogBatching.sameSourcePrefix(Array(repeating: record(10, source), count: 5), budget: 93) == (3, 93))
        #expect(LogBatching.sameSourcePrefix(Array(repeating: record(10, source), count: 5), budget: 92).count == 2)
        #expect(LogBatching.sameSourcePrefix([record(2_000_000, source), record(1, source)]).count == 1)
        let lines = Array(repeating: record(1000, source), count: 2000)
        #expect(LogBatching.sameSourcePrefix(lines).count == (1 << 20) / 1021)
        #expect(LogBatching.sameSourcePrefix([[2, 3], record(10, source)]).count == 0, "a malformed first record")
    }

    @Test func planner() {
        let start = ContinuousClock.now
        var planner = LogBatchPlanner()
        #expect(planner.decision(now: start, pendingBytes: 0) == .idle)
        #expect(planner.decision(now: start, pendingBytes: 10) == .sendNow)
        planner.sent(at: start)
        let soon = start + .milliseconds(300)
        #expect(planner.decision(now: soon, pendingBytes: 10) == .wait(until: start + .seconds(1)))
        #expect(planner.decision(now: soon, pendingBytes: 10, flushRequested: true) == .sendNow)
        #expect(planner.decision(now: soon, pendingBytes: 10, shuttingDown: true) == .sendNow)
        #expect(planner.decision(now: soon, pendingBytes: LogBatching.budgetBytes) == .sendNow)
        #expect(planner.decision(now: soon, pendingBytes: 0, flushRequested: true) == .idle)
        #expect(planner.decision(now: start + .seconds(1), pendingBytes: 10) == .sendNow)
        #expect(planner.decision(now: start + .seconds(5), pendingBytes: 10) == .sendNow)
    }
}
