import AgentCore
@testable import AgentProc
import AgentTestSupport
import Foundation
import Testing

/// A close queued behind a write the child does not read. Its own suite: its waits, each
/// bounded and each stretched by the time a loaded host starves it, add up to more than the
/// five minutes of ``ProcessBeyondTests``.
@Suite(.timeLimit(.minutes(10)))
struct ProcessStalledInputTests {
    @Test func aCloseQueuedBehindAStalledWriteStillEndsTheInput() async throws {
        // The gate opens after three waits of up to 60 s each: the agent's write timeout, the
        // requests' timeouts and the child's own limit all outlast them, so only a close that
        // never ends the input fails the test, however slowly a loaded host gets there.
        try await withProcessServer(configure: { $0.stdinWriteTimeout = .seconds(300) }) { h in
            // The child reads nothing until the test opens the gate (at most 5 minutes), then
            // everything until end-of-file.
            let gate = try makeTempDirectory() + "/gate"
            let wait = "i=0; while [ ! -e \(gate) ] && [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done"
            let body = try JSONSerialization.data(withJSONObject: ["command": "\(wait); cat > /dev/null; echo eof-seen", "stdin": true])
            let started = try await h.client.request("POST", "\(ProcessBeyondTests.base)/start", body: Array(body))
            let id = try #require(jsonObject(started.body)?["id"] as? String)
            let input = try #require(h.manager.lookup(id, chat: nil)?.input)
            let big = String(repeating: "z", count: 1 << 20)
            async let first = ProcessBeyondTests.stdin(h, id, big, timeout: .seconds(300))
            #expect(await eventually(timeout: .seconds(60)) { input.pending.bytes == 1 << 20 })
            async let close = h.client.request("POST", "\(ProcessBeyondTests.base)/\(id)/stdin/close", body: Array("{}".utf8), timeout: .seconds(300))
            #expect(await eventually(timeout: .seconds(60)) { input.pending.waiting == 1 })
            async let late = ProcessBeyondTests.stdin(h, id, "late\n", timeout: .seconds(300))
            #expect(await eventually(timeout: .seconds(60)) { input.pending.waiting == 2 })
            try TestFile.write(gate, [UInt8]())
            // Each awaited on its own, so that a request left without an answer is named, with
            // the input's queue as it stands then.
            let a: RawHTTPClient.Response
            let c: RawHTTPClient.Response
            let b: RawHTTPClient.Response
            do { a = try await first } catch {
                Issue.record("the 1 MiB write: \(error); stdin queue (bytes, waiting): \(input.pending)")
                throw error
            }
            do { c = try await close } catch {
                Issue.record("the close: \(error); stdin queue (bytes, waiting): \(input.pending)")
                throw error
            }
            do { b = try await late } catch {
                Issue.record("the late write: \(error); stdin queue (bytes, waiting): \(input.pending)")
                throw error
            }
            #expect(a.status == 200)
            #expect(jsonInt(jsonObject(a.body)?["written"]) == 1 << 20)
            #expect(c.status == 200)
            // Queued behind the close (or arriving after it): refused, and the turn passes on.
            #expect(b.status == 409, "\(b)")
            let out = try await h.finalOutput(id)
            #expect(out["output"] as? String == "eof-seen\n", "the pipe was closed: cat saw end-of-file")
        }
    }
}
