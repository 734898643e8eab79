import AgentCore
import AgentSystem
@testable import AgentProc
import AgentTestSupport
import Foundation
import Synchronization
import Testing

/// stdin writes to a child that does not read: the bound counts from each write's arrival,
/// what waits behind a write that timed out fails at once, and a close is bounded. A
/// terminal in line mode refuses a line it would silently cut.
@Suite(.timeLimit(.minutes(5)))
struct StdinDeadlineTests {
    static let base = "/api/v0/processes"

    static func post(_ h: Harness, _ path: String, _ bytes: [UInt8]) async throws -> RawHTTPClient.Response {
        try await h.client.request("POST", "\(base)/\(path)", body: bytes, timeout: .seconds(120))
    }

    /// The outcome of one round: nil when the head write timed out before everything was
    /// queued behind it (a host too slow for this bound: try a longer one).
    static func queuedBehindAStalledWrite(timeout: Duration) async throws -> (head: RawHTTPClient.Response, queued: [RawHTTPClient.Response], close: RawHTTPClient.Response)? {
        var outcome: (RawHTTPClient.Response, [RawHTTPClient.Response], RawHTTPClient.Response)?
        try await withProcessServer(configure: { $0.stdinWriteTimeout = timeout }) { h in
            let started = try await h.client.request("POST", "\(Self.base)/start", json: #"{"command":"sleep 600","stdin":true}"#)
            let id = try #require(jsonObject(started.body)?["id"] as? String)
            let input = try #require(h.manager.lookup(id, chat: nil)?.input)
            // The head: more than the pipe holds, so it waits for a child that never reads.
            async let head = Self.post(h, "\(id)/stdin", [UInt8](repeating: 0x61, count: 1 << 20))
            // Soft checks: on a host too slow for this bound the head times out first, and
            // the round is tried again with a longer one.
            let headWaiting = await eventually(timeout: timeout) { input.pending.bytes == 1 << 20 }
            let queued = Task {
                try await withThrowingTaskGroup(of: (Int, RawHTTPClient.Response).self) { group in
                    for n in 0..<5 { group.addTask { (n, try await Self.post(h, "\(id)/stdin", [0x62])) } }
                    var answers: [(Int, RawHTTPClient.Response)] = []
                    for try await answer in group { answers.append(answer) }
                    return answers.sorted { $0.0 < $1.0 }.map(\.1)
                }
            }
            let fiveQueued = headWaiting ? await eventually(timeout: timeout) { input.pending.waiting >= 5 } : false
            async let close = Self.post(h, "\(id)/stdin/close", Array("{}".utf8))
            // Six waiting at once means the head still held the turn when all six were queued.
            let allQueued = fiveQueued ? await eventually(timeout: timeout) { input.pending.waiting == 6 } : false
            let answers = try await (head, queued.value, close)
            _ = try await h.signal(id, #"{"signal":"kill"}"#)
            if allQueued { outcome = answers }
        }
        return outcome
    }

    @Test func writesQueuedBehindAStalledWriteFailAtOnceAndTheCloseIsAnswered() async throws {
        // The bound is made small; a host too slow to queue six requests within it tries longer ones.
        for seconds in [2, 8, 30] {
            guard let (head, queued, close) = try await Self.queuedBehindAStalledWrite(timeout: .seconds(seconds)) else { continue }
            #expect(head.status == 504, "\(head)")
            let headDetail = jsonObject(head.body)?["detail"] as? String ?? ""
            #expect(headDetail.contains("bytes were written"), "\(head)")
            for answer in queued {
                #expect(answer.status == 504, "\(answer)")
                let detail = jsonObject(answer.body)?["detail"] as? String ?? ""
                #expect(detail.hasPrefix("0 bytes were written"), "\(answer)")
                #expect(detail.contains("a write before it"), "it failed with the head, not after waiting itself: \(answer)")
            }
            // The close behind them still ends the input.
            #expect(close.status == 200, "\(close)")
            return
        }
        Issue.record("the head write timed out before six requests were queued behind it, even with a 30 s bound")
    }

    // MARK: Terminal line mode

    static func startTerminal(_ h: Harness, _ command: String) async throws -> String {
        let body = try JSONSerialization.data(withJSONObject: ["command": command, "pty": ["rows": 24, "cols": 80]])
        let started = try await h.client.request("POST", "\(Self.base)/start", body: Array(body))
        try #require(started.status == 200, "\(started)")
        return try #require(jsonObject(started.body)?["id"] as? String)
    }

    @Test func aLineLongerThanTheTerminalHoldsIsRefusedNotCut() async throws {
        try await withProcessServer(configure: { $0.stdinWriteTimeout = .seconds(2) }) { h in
            // A terminal in line mode (the default) whose child never reads.
            let id = try await Self.startTerminal(h, "sleep 600")
            let long = try await Self.post(h, "\(id)/stdin", [UInt8](repeating: 0x61, count: 5000))
            #expect(long.status == 413, "\(long)")
            #expect((jsonObject(long.body)?["message"] as? String)?.contains("line") == true, "\(long)")
            // Lines that fit go in; an unfinished line carries over to the next write.
            #expect(try await Self.post(h, "\(id)/stdin", Array("short line\n".utf8)).status == 200)
            #expect(try await Self.post(h, "\(id)/stdin", [UInt8](repeating: 0x62, count: 4000)).status == 200)
            let over = try await Self.post(h, "\(id)/stdin", [UInt8](repeating: 0x63, count: 200))
            #expect(over.status == 413, "\(over)")
            // Ending the line makes room again.
            #expect(try await Self.post(h, "\(id)/stdin", Array("\n".utf8)).status == 200)
            #expect(try await Self.post(h, "\(id)/stdin", [UInt8](repeating: 0x64, count: 4000)).status == 200)
            // Whole lines nobody reads: the terminal stops taking them (back pressure), and the
            // write's bound says how much went in.
            let line = [UInt8](repeating: 0x65, count: 63) + [0x0a]
            let lines = try await Self.post(h, "\(id)/stdin", Array(Array(repeating: line, count: (1 << 20) / 64).joined()))
            #expect(lines.status == 504, "\(lines)")
            #expect((jsonObject(lines.body)?["detail"] as? String)?.contains("bytes were written before") == true, "\(lines)")
            _ = try await h.signal(id, #"{"signal":"kill"}"#)
        }
    }

    @Test func aTerminalInRawModeTakesLongInput() async throws {
        try await withProcessServer { h in
            // Raw mode: no line buffer to overflow; the child reads what comes.
            let id = try await Self.startTerminal(h, "stty raw -echo; echo ready; exec head -c 6000 > /dev/null")
            let ready = try await h.client.request("GET", "\(Self.base)/\(id)/output?until_literal=ready&timeout=60s", timeout: .seconds(120))
            #expect(jsonObject(ready.body)?["condition"] as? String == "matched", "\(ready)")
            let long = try await Self.post(h, "\(id)/stdin", [UInt8](repeating: 0x61, count: 6000))
            #expect(long.status == 200, "\(long)")
            let out = try await h.finalOutput(id)
            #expect(jsonInt(out["exit_code"]) == 0, "head read all 6000 bytes: \(out)")
        }
    }

    /// The waits' tokens go round within the reactor's client words: a waiter whose tokens
    /// start at the last one still waits, and wakes, after it. Before, the token after it
    /// broke the reactor's precondition, a trap after about 10^12 waits.
    @Test func writabilityWaitTokensGoRound() async throws {
        let waiter = WritableWaiter(reactor: ChildReactor(name: "test-tokens"), firstToken: ChildReactor.maxClientWord)
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        for _ in 0..<3 { #expect(await waiter.waitWritable(fds[1], timeout: .seconds(60))) }
    }
}
