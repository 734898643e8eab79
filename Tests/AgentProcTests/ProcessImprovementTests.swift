@testable import AgentProc
import AgentTestSupport
import Foundation
import Testing

/// The README's list of deliberate differences from the reference, one test each.
@Suite(.timeLimit(.minutes(2)))
struct ProcessImprovementTests {
    /// Improvement 2: shutdown terminates whole process groups, grandchildren included,
    /// and escalates to SIGKILL for groups that ignore SIGTERM.
    @Test func shutdownTerminatesWholeProcessGroups() async throws {
        let marker = "sleep 313.\(Int.random(in: 1000...9999))"
        let stubborn = "sleep 317.\(Int.random(in: 1000...9999))"
        try await withProcessServer(configure: { $0.shutdownGrace = .milliseconds(500) }) { h in
            // The shell exits at once; its background grandchild keeps running.
            let bg = try await h.start("\(marker) >/dev/null 2>&1 & echo started")
            _ = try await h.finalOutput(bg)
            _ = try await h.start("trap '' TERM; \(stubborn)")
            #expect(await eventually { processExists(commandLine: marker) && processExists(commandLine: stubborn) })
            await h.manager.shutdown()
            #expect(await eventually { !processExists(commandLine: marker) && !processExists(commandLine: stubborn) })
            // New starts are refused once closed.
            let r = try await h.client.request("POST", "/api/v0/processes/start", json: #"{"command":"true"}"#)
            #expect(r.status == 500)
            #expect(jsonObject(r.body)?["detail"] as? String == "manager is closed")
        }
    }

    /// Improvement 3: `cmd &` reports the shell's real status promptly and keeps
    /// collecting the orphan's output; the API never blocks on the orphan.
    @Test func orphanHoldingThePipeDoesNotBlockExit() async throws {
        let gate = try makeTempDirectory() + "/go"
        try await withProcessServer { h in
            // The orphan waits (at most 20 s) for the test to open the gate, then writes.
            let orphan = "(for i in $(seq 1 400); do [ -e \(gate) ] && break; sleep 0.05; done; echo orphan-late) &"
            let id = try await h.start("\(orphan) echo started; exit 7")
            let out = try await h.finalOutput(id)
            #expect(jsonInt(out["exit_code"]) == 7)
            #expect(out["output"] as? String == "started\n")
            try TestFile.write(gate, [UInt8]())
            let late = await eventually {
                let r = try? await h.output(id)
                return (r.flatMap { jsonObject($0.body) }?["output"] as? String)?.contains("orphan-late") == true
            }
            #expect(late)
        }
    }

    /// Improvement 4: exited processes are reaped by the timer, not only by /list, and at
    /// most `maxRetainedExited` are kept.
    @Test func boundedRetention() async throws {
        try await withProcessServer(configure: { $0.maxRetainedExited = 3 }) { h in
            var ids: [String] = []
            for i in 0..<6 {
                let id = try await h.start("exit \(i)")
                _ = try await h.finalOutput(id)
                ids.append(id)
            }
            // One more start trims to the bound (3 exited + the new one).
            let last = try await h.start("sleep 0.05")
            #expect(h.manager.count <= 4)
            #expect(try await h.output(ids[0]).status == 404)
            _ = try await h.finalOutput(last)
        }
    }

    /// The manager's service reaps exited processes on its timer (the reference reaps only
    /// on /list). No read follows the exit here, so the timer can run as fast as it likes.
    @Test func reapingOnATimer() async throws {
        try await withProcessServer(configure: {
            $0.reapAfter = .milliseconds(200)
            $0.reapInterval = .milliseconds(50)
        }) { h in
            for i in 0..<3 { _ = try await h.start("exit \(i)") }
            #expect(await eventually { h.manager.count == 0 })
        }
    }

    /// Improvement 5: a chat header that is not a UUID is a 400 on every route.
    @Test func invalidChatHeaderIs400Everywhere() async throws {
        try await withProcessServer { h in
            let id = try await h.start("sleep 600")
            let headers = [("Coder-Chat-Id", "not-a-uuid")]
            let requests: [(String, String, String?)] = [
                ("POST", "/api/v0/processes/start", #"{"command":"true"}"#),
                ("GET", "/api/v0/processes/list", nil),
                ("GET", "/api/v0/processes/\(id)/output", nil),
                ("POST", "/api/v0/processes/\(id)/signal", #"{"signal":"kill"}"#),
                ("GET", "/api/v0/processes/\(id)/stream", nil),
            ]
            for (method, path, body) in requests {
                let r = try await h.client.request(method, path, headers: headers, body: body.map { Array($0.utf8) })
                #expect(r.status == 400, "\(method) \(path)")
                #expect(jsonObject(r.body)?["message"] as? String == "Invalid Coder-Chat-Id header.")
            }
            #expect(h.manager.count == 1)
            #expect(h.manager.lookup(id, chat: nil)?.isRunning == true)
            _ = try await h.signal(id, #"{"signal":"kill"}"#)
        }
    }

    /// Improvement 6: killed processes keep `exit_code: -1` and name the signal.
    @Test func signalNameAccompaniesMinusOne() async throws {
        try await withProcessServer { h in
            let id = try await h.start("kill -SEGV $$")
            let out = try await h.finalOutput(id)
            #expect(jsonInt(out["exit_code"]) == -1)
            #expect(out["exit_signal"] as? String == "SIGSEGV")
            let listed = try await h.list().first
            #expect(listed?["exit_signal"] as? String == "SIGSEGV")
        }
    }

    /// 200 processes started at once: every one gets its own, complete output.
    @Test func twoHundredConcurrentProcesses() async throws {
        try await withProcessServer { h in
            let ids = try await withThrowingTaskGroup(of: (Int, String).self) { group in
                for i in 0..<200 {
                    group.addTask { (i, try await h.start("echo start-\(i); sleep 0.2; echo end-\(i)")) }
                }
                var ids: [Int: String] = [:]
                for try await (i, id) in group { ids[i] = id }
                return ids
            }
            #expect(Set(ids.values).count == 200)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (i, id) in ids {
                    group.addTask {
                        let out = try await h.finalOutput(id)
                        #expect(out["output"] as? String == "start-\(i)\nend-\(i)\n")
                        #expect(jsonInt(out["exit_code"]) == 0)
                    }
                }
                try await group.waitForAll()
            }
        }
    }
}
