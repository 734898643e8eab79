import AgentProc
import AgentTestSupport
import Foundation
import Testing

/// A fast writer's pipe is read in large passes (its readiness is off between them); once
/// the writer slows down, the pipe wakes the reactor again for every write.
@Suite(.timeLimit(.minutes(5)))
struct BulkOutputTests {
    static let base = "/api/v0/processes"

    @Test(arguments: [true, false])
    func aLineAfterABurstArrivesWhileTheProcessRuns(spooled: Bool) async throws {
        try await withProcessServer(configure: { $0.spoolOutput = spooled }) { h in
            // 4 MiB at once (passes of hundreds of KiB), then a pause, then one short line (on a
            // line of its own: a match is per line): it must be seen while the process still
            // runs, not only when its pipe closes.
            let command = "head -c 4194304 /dev/zero; echo; sleep 0.5; echo after-the-burst; exec sleep 60"
            let body = try JSONSerialization.data(withJSONObject: ["command": command])
            let started = try await h.client.request("POST", "\(Self.base)/start", body: Array(body), timeout: .seconds(60))
            try #require(started.status == 200, "start: \(started)")
            let id = try #require(jsonObject(started.body)?["id"] as? String)
            let response = try await h.client.request(
                "GET", "\(Self.base)/\(id)/output?until_literal=after-the-burst&timeout=30s", timeout: .seconds(120))
            let answer = try #require(jsonObject(response.body))
            #expect(answer["condition"] as? String == "matched", "\(answer)")
            #expect(answer["running"] as? Bool == true)
            let truncated = try #require(answer["truncated"] as? [String: Any])
            #expect(jsonInt(truncated["original_bytes"]) == 4_194_304 + "\nafter-the-burst\n".utf8.count)
            #expect(try await h.signal(id, #"{"signal":"kill"}"#).status == 200)
        }
    }

    /// Output nobody reads live is moved past the agent (spliced into the spool or
    /// /dev/null) while a fast writer runs: every snapshot taken meanwhile still has its
    /// tail, the omitted marker and `truncated` (a move used to empty the tail until the next
    /// read, and a snapshot then showed the head alone, without metadata).
    @Test(arguments: [true, false])
    func everySnapshotOfAFastWriterHasItsTruncation(spooled: Bool) async throws {
        try await withProcessServer(configure: { $0.spoolOutput = spooled }) { h in
            let id = try await h.start("exec yes")
            let process = try #require(h.manager.lookup(id, chat: nil))
            // Past the head and a tail's worth first (a snapshot's total never goes back).
            #expect(await eventually(timeout: .seconds(60)) { (process.snapshot().truncation?.originalBytes ?? 0) > 32768 })
            var seen = 0
            for attempt in 0..<20 {
                let response = try await h.output(id)
                try #require(response.status == 200, "snapshot \(attempt): \(response)")
                let json = try #require(jsonObject(response.body))
                #expect(json["running"] as? Bool == true)
                let truncated = try #require(json["truncated"] as? [String: Any], "snapshot \(attempt) has no truncated block")
                let original = jsonInt(truncated["original_bytes"]) ?? 0
                #expect(original > 32768, "snapshot \(attempt): \(truncated)")
                #expect(original >= seen, "a snapshot's total never goes back")
                seen = max(seen, original)
                #expect((jsonInt(truncated["omitted_bytes"]) ?? 0) > 0, "snapshot \(attempt): \(truncated)")
                let output = try #require(json["output"] as? String)
                #expect(output.contains("\n\n... [omitted "), "snapshot \(attempt) has no omitted marker")
                #expect(output.hasSuffix("y\n") || output.hasSuffix("y"), "snapshot \(attempt) ends in its tail")
            }
            // The tail and the total keep up with the writer (the pipe is read after moves).
            #expect(await eventually(timeout: .seconds(60)) { (process.snapshot().truncation?.originalBytes ?? 0) > seen })
            #expect(try await h.signal(id, #"{"signal":"kill"}"#).status == 200)
        }
    }

    @Test func aBurstReadInLargePassesIsCompleteAndInOrder() async throws {
        try await withProcessServer { h in
            let body = try JSONSerialization.data(withJSONObject: ["command": "seq 1 300000"])
            let started = try await h.client.request("POST", "\(Self.base)/start", body: Array(body), timeout: .seconds(60))
            let id = try #require(jsonObject(started.body)?["id"] as? String)
            _ = try await h.finalOutput(id)
            var offset = 0
            var bytes: [UInt8] = []
            for _ in 0..<200 {
                let response = try await h.client.request("GET", "\(Self.base)/\(id)/output?offset=\(offset)&limit=4194304")
                let json = try #require(jsonObject(response.body))
                let next = try #require(jsonInt(json["next_offset"]))
                if next == offset { break }
                bytes += Array((json["output"] as? String ?? "").utf8)
                offset = next
            }
            let expected = Array((1...300_000).map { "\($0)\n" }.joined().utf8)
            #expect(bytes.count == expected.count)
            #expect(bytes == expected)
        }
    }
}
