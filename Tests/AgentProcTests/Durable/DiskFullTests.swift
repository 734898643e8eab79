import AgentCore
@testable import AgentProc
import AgentTestSupport
import Foundation
import Logging
import Testing

/// The state directory on a real, small disk that fills up: a start whose tool-call claim
/// cannot be written is refused and runs nothing; other starts run and say their record
/// was not kept; every failed write is logged (rate-limited) and shown by `GET /status`.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct DiskFullTests {
    static let base = "/api/v0/processes"

    /// Tool-call headers whose call id is long (each claim line ~1 KiB), so the claims
    /// file's last page fills after a few starts.
    static func headers(chat: String, call n: Int) -> [(String, String)] {
        [
            ("Coder-Chat-Id", chat), ("Coder-Tool-Call-Message-Id", "1"),
            ("Coder-Tool-Call-Id", "call-\(n)-" + String(repeating: "x", count: 1000)), ("Coder-Tool-Call-Age-Ms", "0"),
        ]
    }

    @Test func toolCallStartsOnAFullDiskAreRefusedAndRunOnceAfterARestart() async throws {
        let disk = try SmallDisk()
        defer { disk.remove() }
        let runs = try makeTempDirectory()
        defer { try? FileManager.default.removeItem(atPath: runs) }
        let chat = UUID().uuidString.lowercased()
        let calls = 8
        func body(_ n: Int) -> String { #"{"command":"echo ran >> \#(runs)/\#(n)"}"# }
        let log = CapturedLog()
        var refused: [Int] = []
        try await withProcessServer(configure: { $0.stateDirectory = disk.path }, logger: log.logger) { h in
            try disk.fill()
            for n in 0..<calls {
                let r = try await h.client.request(
                    "POST", "\(Self.base)/start", headers: Self.headers(chat: chat, call: n), body: Array(body(n).utf8), timeout: .seconds(60))
                if r.status == 200 {
                    let id = try #require(jsonObject(r.body)?["id"] as? String)
                    _ = try await h.finalOutput(id, chat: chat)
                    // An answered start's claim is on disk.
                    let claims = (try? String(contentsOfFile: disk.path + "/processes/tool-calls.jsonl", encoding: .utf8)) ?? ""
                    let claimed = claims.contains("call-\(n)-")
                    #expect(claimed, "call \(n) answered 200 but its claim is not on disk")
                } else {
                    #expect(r.status == 503, "\(r)")
                    let json = try #require(jsonObject(r.body))
                    #expect((json["message"] as? String)?.contains("could not be recorded") == true, "\(json)")
                    #expect((json["detail"] as? String)?.contains("o space left on device") == true, "\(json)")
                    refused.append(n)
                }
            }
            #expect(!refused.isEmpty, "a full disk refused no tool-call start")
            // A refused start ran nothing and left no process.
            #expect(h.manager.count == calls - refused.count)
            for n in refused { #expect(!FileManager.default.fileExists(atPath: "\(runs)/\(n)")) }
            // The failures are logged, not only counted (and the status says so).
            #expect(log.all.contains { $0.level >= .warning && $0.message.contains("could not be written") })
            let status = try #require(jsonObject(try await h.client.request("GET", "\(Self.base)/status").body))
            let durable = try #require(status["durable_writes"] as? [String: Any])
            #expect((jsonInt(durable["failures"]) ?? 0) > 0, "\(status)")
        }
        disk.free()
        // The agent restarts with room on the disk: every call, retried, has run exactly once.
        try await withProcessServer(configure: { $0.stateDirectory = disk.path }) { h in
            for n in 0..<calls {
                let r = try await h.client.request(
                    "POST", "\(Self.base)/start", headers: Self.headers(chat: chat, call: n), body: Array(body(n).utf8), timeout: .seconds(60))
                try #require(r.status == 200, "\(r)")
                let json = try #require(jsonObject(r.body))
                let id = try #require(json["id"] as? String)
                #expect((json["attached"] as? Bool == true) == !refused.contains(n), "call \(n): \(json)")
                if json["attached"] == nil { _ = try await h.finalOutput(id, chat: chat) }
                // And again: the same process.
                let again = try await h.client.request(
                    "POST", "\(Self.base)/start", headers: Self.headers(chat: chat, call: n), body: Array(body(n).utf8), timeout: .seconds(60))
                #expect(jsonObject(again.body)?["id"] as? String == id)
            }
        }
        for n in 0..<calls {
            #expect((try? String(contentsOfFile: "\(runs)/\(n)", encoding: .utf8)) == "ran\n", "call \(n) did not run exactly once")
        }
    }

    @Test func aStartWithoutAToolCallRunsOnAFullDiskAndSaysItsRecordIsLost() async throws {
        let disk = try SmallDisk()
        defer { disk.remove() }
        let log = CapturedLog()
        try await withProcessServer(configure: { $0.stateDirectory = disk.path }, logger: log.logger) { h in
            try disk.fill()
            var warned: [String: Any]?
            // The records file's last page may take a few lines more: at most 32 starts.
            for _ in 0..<32 {
                let r = try await h.client.request(
                    "POST", "\(Self.base)/start", body: Array(#"{"command":"echo still runs; : \#(String(repeating: "y", count: 900))"}"#.utf8),
                    timeout: .seconds(60))
                try #require(r.status == 200, "\(r)")
                let json = try #require(jsonObject(r.body))
                let out = try await h.finalOutput(try #require(json["id"] as? String))
                #expect(out["output"] as? String == "still runs\n")
                if json["warning"] != nil {
                    warned = json
                    break
                }
            }
            let json = try #require(warned, "no start said its record was not written")
            #expect((json["warning"] as? String)?.contains("o space left on device") == true, "\(json)")
            let status = try #require(jsonObject(try await h.client.request("GET", "\(Self.base)/status").body))
            let durable = try #require(status["durable_writes"] as? [String: Any])
            let last = try #require(durable["last_failure"] as? [String: Any], "\(status)")
            #expect(["processes.jsonl", "spool"].contains(last["file"] as? String), "\(status)")
            // The output the spool could not keep is logged too, not only counted.
            #expect(await eventually { log.all.contains { $0.level >= .warning && $0.metadata["file"] == "spool" } })
            #expect(log.all.contains { $0.level >= .warning && $0.metadata["file"] == "processes.jsonl" })
        }
    }

    /// A burst of failures makes one log line per interval; all are counted.
    @Test func failuresAreLoggedAtMostOncePerInterval() {
        let log = CapturedLog()
        let failures = DurableFailures(logger: log.logger)
        for _ in 0..<100 {
            failures.report(.processRecords, SystemCallError(call: "write", errno: ENOSPC))
        }
        failures.report(.toolCalls, SystemCallError(call: "write", errno: ENOSPC))
        #expect(failures.count == 101)
        let lines = log.all.filter { $0.level >= .warning }
        #expect(lines.count == 2, "\(lines.map(\.message))")
        #expect(failures.last?.file == .toolCalls)
    }
}
