import AgentCore
import AgentProc
import AgentTestSupport
import Foundation
import Synchronization
import Testing

/// The reference's process API, through real processes and a real HTTP client.
@Suite(.timeLimit(.minutes(2)))
struct ProcessAPITests {
    static let chatA = "9b2d6c1e-2f4a-4b8e-9c3d-0a1b2c3d4e5f"
    static let chatB = "1f2e3d4c-5b6a-4789-8a9b-0c1d2e3f4a5b"

    @Test func startReturnsIDWithOrWithoutBackground() async throws {
        try await withProcessServer { h in
            for background in [nil, true, false] {
                let id = try await h.start("true", background: background)
                #expect(UUID(uuidString: id) != nil)
                #expect(id == id.lowercased())
            }
        }
    }

    @Test func emptyCommandAndInvalidJSONAre400() async throws {
        try await withProcessServer { h in
            for body in [#"{"command":""}"#, "{}", "null", #"{"command":null}"#] {
                let r = try await h.client.request("POST", "/api/v0/processes/start", json: body)
                #expect(r.status == 400)
                #expect(jsonObject(r.body)?["message"] as? String == "Command is required.")
            }
            let r = try await h.client.request("POST", "/api/v0/processes/start", json: "{invalid json")
            #expect(r.status == 400)
            let json = try #require(jsonObject(r.body))
            #expect((json["message"] as? String)?.contains("valid JSON") == true)
            #expect(json["detail"] as? String == "invalid character 'i' looking for beginning of object key string")
        }
    }

    @Test func whitespaceCommandIsAccepted() async throws {
        try await withProcessServer { h in
            let id = try await h.start("   ")
            let out = try await h.finalOutput(id)
            #expect(jsonInt(out["exit_code"]) == 0)
        }
    }

    @Test func workdirIsUsed() async throws {
        let dir = try makeTempDirectory()
        try await withProcessServer { h in
            let id = try await h.start("touch marker.txt && ls marker.txt", workdir: dir)
            let out = try await h.finalOutput(id)
            #expect(jsonInt(out["exit_code"]) == 0)
            #expect((out["output"] as? String)?.contains("marker.txt") == true)
            #expect(FileManager.default.fileExists(atPath: dir + "/marker.txt"))
            let listed = try await h.list().first { $0["id"] as? String == id }
            #expect(listed?["workdir"] as? String == dir)
        }
    }

    @Test func defaultDirectoryIsHomeFromProvider() async throws {
        let home = try makeTempDirectory()
        try await withProcessServer(configure: { $0.homeDirectory = { home } }) { h in
            let id = try await h.start("pwd")
            let out = try await h.finalOutput(id)
            #expect((out["output"] as? String) == home + "\n")
            #expect(try await h.list().first?["workdir"] as? String == home)
        }
    }

    @Test func configuredDirectoryWinsAndMissingOneFallsBackToHome() async throws {
        let home = try makeTempDirectory()
        let configured = try makeTempDirectory()
        try await withProcessServer(configure: {
            $0.homeDirectory = { home }
            $0.environmentProvider = StaticEnvironmentProvider(directory: configured)
        }) { h in
            let out = try await h.finalOutput(try await h.start("pwd"))
            #expect(out["output"] as? String == configured + "\n")
        }
        try await withProcessServer(configure: {
            $0.homeDirectory = { home }
            $0.environmentProvider = StaticEnvironmentProvider(directory: configured + "/missing")
        }) { h in
            let out = try await h.finalOutput(try await h.start("pwd"))
            #expect(out["output"] as? String == home + "\n")
        }
    }

    @Test func environmentLayersInOrder() async throws {
        try await withProcessServer(configure: {
            $0.baseEnvironment["LAYER_BASE"] = "base"
            $0.baseEnvironment["LAYER_OVERRIDE"] = "base"
            $0.environmentProvider = StaticEnvironmentProvider(environment: [
                "LAYER_HOOK": "hook", "LAYER_OVERRIDE": "hook", "CODER_CHAT_ID": "hook",
            ])
        }) { h in
            let id = try await h.start(
                "printenv LAYER_BASE LAYER_HOOK LAYER_OVERRIDE LAYER_REQ CODER_CHAT_ID",
                env: ["LAYER_REQ": "req", "LAYER_OVERRIDE": "req", "CODER_CHAT_ID": "req"],
                chat: Self.chatA)
            let out = try await h.finalOutput(id)
            #expect(out["output"] as? String == "base\nhook\nreq\nreq\n\(Self.chatA)\n")
        }
    }

    /// A start without variables of its own reuses the environment built for the same
    /// provider generation and chat; new variables, a new generation or another chat build
    /// a new one.
    @Test func environmentIsReusedPerGenerationAndChat() async throws {
        let provider = SteppedEnvironmentProvider(["STEP": "one"], generation: 1)
        try await withProcessServer(configure: { $0.environmentProvider = provider }) { h in
            /// Starts `printenv` for `chat` and expects it to see `step` and the chat.
            func expectStep(_ step: String, _ chat: String, env: [String: String]? = nil, sourceLocation: SourceLocation = #_sourceLocation) async throws {
                let out = try await h.finalOutput(try await h.start("printenv STEP CODER_CHAT_ID", env: env, chat: chat))
                #expect(out["output"] as? String == "\(step)\n\(chat)\n", sourceLocation: sourceLocation)
            }
            try await expectStep("one", Self.chatA)
            try await expectStep("one", Self.chatB)
            // Same generation: the provider promises the same variables, so the block is reused
            // (changing them anyway shows that it was).
            provider.set(["STEP": "two"], generation: 1)
            try await expectStep("one", Self.chatA)
            try await expectStep("one", Self.chatB)
            // Variables of the request's own: built afresh.
            try await expectStep("two", Self.chatA, env: ["OTHER": "x"])
            provider.set(["STEP": "three"], generation: 2)
            try await expectStep("three", Self.chatA)
            try await expectStep("three", Self.chatB)
        }
    }

    /// What running sessions publish (the desktop's `DISPLAY`) is in every start's
    /// environment, over the agent's and the provider's variables and under the request's;
    /// a change (the desktop stopped, or started on another display) reaches the next start
    /// even without a new provider generation (the reused environment is rebuilt).
    @Test func sessionEnvironmentLayersUnderTheRequest() async throws {
        let sessions = SessionEnvironment()
        try await withProcessServer(configure: {
            $0.baseEnvironment["DISPLAY"] = ":base"
            $0.environmentProvider = StaticEnvironmentProvider(environment: ["DISPLAY": ":hook"])
            $0.sessionEnvironment = sessions
        }) { (h: Harness) async throws in
            func display(env: [String: String]? = nil) async throws -> String? {
                try await h.finalOutput(try await h.start("echo $DISPLAY", env: env))["output"] as? String
            }
            #expect(try await display() == ":hook\n", "no session yet")
            sessions.set(["DISPLAY": ":10"], for: "desktop")
            #expect(try await display() == ":10\n")
            #expect(try await display(env: ["DISPLAY": ":7"]) == ":7\n", "the request's own wins")
            sessions.set(["DISPLAY": ":11"], for: "desktop")
            #expect(try await display() == ":11\n")
            sessions.set([:], for: "desktop")
            #expect(try await display() == ":hook\n", "the session ended")
        }
    }

    /// A provider that gives no generation (the protocol's default) has its variables read
    /// and merged at every start.
    @Test func environmentWithoutGenerationIsBuiltEachStart() async throws {
        let provider = UnversionedEnvironmentProvider(SteppedEnvironmentProvider(["STEP": "one"], generation: 1))
        try await withProcessServer(configure: { $0.environmentProvider = provider }) { h in
            var seen = try await h.finalOutput(try await h.start("printenv STEP"))["output"] as? String
            #expect(seen == "one\n")
            provider.inner.set(["STEP": "two"], generation: 1)
            seen = try await h.finalOutput(try await h.start("printenv STEP"))["output"] as? String
            #expect(seen == "two\n")
        }
    }

    @Test func emptyListIsAnArray() async throws {
        try await withProcessServer { h in
            let r = try await h.client.request("GET", "/api/v0/processes/list")
            #expect(r.status == 200)
            #expect(r.bodyText.contains(#""processes":[]"#))
        }
    }

    @Test func chatFiltering() async throws {
        try await withProcessServer { h in
            _ = try await h.start("true", chat: Self.chatA)
            _ = try await h.start("true", chat: Self.chatB)
            _ = try await h.start("true", chat: Self.chatA)
            #expect(try await h.list(chat: Self.chatA).count == 2)
            #expect(try await h.list(chat: Self.chatB).count == 1)
            #expect(try await h.list().count == 3)
            #expect(try await h.list(chat: UUID().uuidString).count == 0)
            // Upper-case and braced forms name the same chat.
            #expect(try await h.list(chat: "{" + Self.chatA.uppercased() + "}").count == 2)
        }
    }

    @Test func listCapsAtTenNewestFirst() async throws {
        try await withProcessServer { h in
            var ids: [String] = []
            for i in 0..<12 { ids.append(try await h.start("exit \(i)")) }
            for id in ids { _ = try await h.finalOutput(id) }
            let listed = try await h.list()
            #expect(listed.count == 10)
            let started = listed.compactMap { jsonInt($0["started_at_unix"]) }
            #expect(started == started.sorted(by: >))
            // Ties within a second are ordered newest first too (deterministic, unlike the reference).
            #expect(listed.compactMap { $0["id"] as? String } == Array(ids.reversed().prefix(10)))
        }
    }

    @Test func runningFirstAndExitCodesOnlyWhenExited() async throws {
        try await withProcessServer { h in
            let done = try await h.start("true")
            _ = try await h.finalOutput(done)
            let running = try await h.start("sleep 600")
            let listed = try await h.list()
            #expect(listed.first?["id"] as? String == running)
            #expect(listed.first?["running"] as? Bool == true)
            #expect(listed.first?["exit_code"] == nil)
            #expect(listed.first?["exited_at_unix"] == nil)
            #expect(listed.last?["running"] as? Bool == false)
            #expect(jsonInt(listed.last?["exit_code"]) == 0)
            #expect(jsonInt(listed.last?["exited_at_unix"]) != nil)
            _ = try await h.signal(running, #"{"signal":"kill"}"#)
        }
    }

    @Test func outputOfEcho() async throws {
        try await withProcessServer { h in
            let out = try await h.finalOutput(try await h.start("echo hello"))
            #expect(out["running"] as? Bool == false)
            #expect(jsonInt(out["exit_code"]) == 0)
            #expect(out["output"] as? String == "hello\n")
            #expect(out["command"] as? String == "echo hello")
            #expect(out["truncated"] == nil)
        }
    }

    @Test func exitCodes() async throws {
        try await withProcessServer { h in
            #expect(jsonInt(try await h.finalOutput(try await h.start("exit 42"))["exit_code"]) == 42)
            let sleeper = try await h.start("sleep 600")
            #expect(try await h.signal(sleeper, #"{"signal":"kill"}"#).status == 200)
            let killed = try await h.finalOutput(sleeper)
            #expect(jsonInt(killed["exit_code"]) == -1)
            #expect(killed["exit_signal"] as? String == "SIGKILL")
        }
    }

    @Test func unknownIDAndChatIsolation() async throws {
        try await withProcessServer { h in
            let unknown = try await h.output("nope")
            #expect(unknown.status == 404)
            #expect(jsonObject(unknown.body)?["message"] as? String == #"Process "nope" not found."#)
            let id = try await h.start("echo a", chat: Self.chatA)
            _ = try await h.finalOutput(id, chat: Self.chatA)
            #expect(try await h.output(id, chat: Self.chatB).status == 404)
            #expect(try await h.output(id).status == 200)
            // A process without a chat is readable by every chat.
            let open = try await h.start("echo b")
            #expect(try await h.output(open, chat: Self.chatB).status == 200)
        }
    }

    @Test func waitReturnsAfterExitWithFinalOutput() async throws {
        try await withProcessServer { h in
            let id = try await h.start("sleep 0.3; echo late")
            let r = try await h.output(id, wait: true)
            let json = try #require(jsonObject(r.body))
            #expect(json["running"] as? Bool == false)
            #expect(json["output"] as? String == "late\n")
            // Already exited: returns at once.
            let again = try await h.output(id, wait: true)
            #expect(jsonObject(again.body)?["running"] as? Bool == false)
            // Anything but exactly wait=true does not wait.
            let slow = try await h.start("sleep 600")
            let notWaiting = try await h.client.request("GET", "/api/v0/processes/\(slow)/output?wait=1")
            #expect(jsonObject(notWaiting.body)?["running"] as? Bool == true)
            _ = try await h.signal(slow, #"{"signal":"kill"}"#)
        }
    }

    @Test func twoWaitersAreReleasedByOneKill() async throws {
        try await withProcessServer { h in
            let id = try await h.start("sleep 60")
            async let first = h.output(id, wait: true)
            async let second = h.output(id, wait: true)
            try await Task.sleep(for: .milliseconds(200))
            #expect(try await h.signal(id, #"{"signal":"kill"}"#).status == 200)
            let (a, b) = try await (first, second)
            #expect(jsonObject(a.body)?["running"] as? Bool == false)
            #expect(jsonObject(b.body)?["running"] as? Bool == false)
        }
    }

    @Test func waitIsCappedByMaxWait() async throws {
        try await withProcessServer(configure: { $0.maxWait = .milliseconds(300) }) { h in
            let id = try await h.start("sleep 600")
            let r = try await h.output(id, wait: true)
            #expect(r.status == 200)
            #expect(jsonObject(r.body)?["running"] as? Bool == true)
            _ = try await h.signal(id, #"{"signal":"kill"}"#)
        }
    }

    @Test func killAndTerminateEndTheProcess() async throws {
        try await withProcessServer { h in
            for name in ["kill", "terminate"] {
                let id = try await h.start("sleep 60")
                let r = try await h.signal(id, #"{"signal":"\#(name)"}"#)
                #expect(r.status == 200)
                #expect(jsonObject(r.body)?["message"] as? String == #"Signal "\#(name)" sent to process "\#(id)"."#)
                let out = try await h.finalOutput(id)
                #expect(out["exit_signal"] as? String == (name == "kill" ? "SIGKILL" : "SIGTERM"))
            }
        }
    }

    @Test func signalErrorsInReferenceOrder() async throws {
        try await withProcessServer { h in
            #expect(try await h.signal("nope", #"{"signal":"kill"}"#).status == 404)
            // Bad body beats unknown id.
            #expect(try await h.signal("nope", "{bad").status == 400)
            let empty = try await h.signal("nope", #"{"signal":""}"#)
            #expect(empty.status == 400)
            #expect(jsonObject(empty.body)?["message"] as? String == "Signal is required.")
            let foo = try await h.signal("nope", #"{"signal":"SIGFOO"}"#)
            #expect(foo.status == 400)
            #expect(jsonObject(foo.body)?["message"] as? String == #"Unsupported signal "SIGFOO". Use "kill" or "terminate"."#)
            #expect(try await h.signal("nope", #"{"signal":"KILL"}"#).status == 400)
            let done = try await h.start("true")
            _ = try await h.finalOutput(done)
            let exited = try await h.signal(done, #"{"signal":"kill"}"#)
            #expect(exited.status == 409)
            #expect(jsonObject(exited.body)?["message"] as? String == #"Process "\#(done)" is not running."#)
            // A foreign chat's process is 404 even with a bad body.
            let mine = try await h.start("sleep 600", chat: Self.chatA)
            #expect(try await h.signal(mine, "{bad", chat: Self.chatB).status == 404)
            #expect(try await h.signal(mine, #"{"signal":"kill"}"#, chat: Self.chatA).status == 200)
        }
    }

    @Test func largeOutputIsHeadTailTruncated() async throws {
        try await withProcessServer { h in
            let out = try await h.finalOutput(try await h.start("seq 1 20000"))
            let meta = try #require(out["truncated"] as? [String: Any])
            #expect(meta["strategy"] as? String == "head_tail")
            #expect(jsonInt(meta["omitted_bytes"])! > 0)
            #expect(jsonInt(meta["original_bytes"])! > jsonInt(meta["retained_bytes"])!)
            let text = try #require(out["output"] as? String)
            #expect(text.contains("... [omitted"))
            #expect(text.hasPrefix("1\n2\n3\n"))
            #expect(text.hasSuffix("19999\n20000\n"))
            #expect(jsonInt(meta["retained_bytes"]) == text.utf8.count)
        }
    }

    /// A burst no one watches is dropped unread by the kernel (splice to /dev/null) but
    /// still counted, and the tail stays the exact last bytes written.
    @Test func unwatchedBurstsKeepExactCountsAndTail() async throws {
        try await withProcessServer { h in
            let expected = (1...4000).map { "\($0)\n" }.joined()
            // dd writes its block in one write(2): the reactor finds 900 000 bytes waiting.
            let out = try await h.finalOutput(try await h.start("dd if=/dev/zero bs=900000 count=1 2>/dev/null; seq 1 4000"))
            let meta = try #require(out["truncated"] as? [String: Any])
            #expect(jsonInt(meta["original_bytes"]) == 900_000 + expected.utf8.count)
            let text = try #require(out["output"] as? String)
            let marker = try #require(text.range(of: " bytes] ...\n\n"))
            let tail = String(text[marker.upperBound...])
            #expect(tail.utf8.count >= 8000 && expected.hasSuffix(tail), "the tail is the last bytes, contiguous")
        }
    }

    /// Without `stdin`, a command's standard input is /dev/null (read-only, at its end at
    /// once), twice in a row: the spawn hands every child the same opened /dev/null.
    @Test func stdinIsDevNullWithoutInput() async throws {
        try await withProcessServer { h in
            for _ in 0..<2 {
                let out = try await h.finalOutput(
                    try await h.start("readlink /proc/self/fd/0; head -c 1 | wc -c; (echo x >&0) 2>/dev/null || echo read-only"))
                #expect(out["output"] as? String == "/dev/null\n0\nread-only\n", "\(out)")
            }
        }
    }

    @Test func stdoutAndStderrAreCombined() async throws {
        try await withProcessServer { h in
            let out = try await h.finalOutput(try await h.start("echo out; echo err >&2; echo out2"))
            #expect(out["output"] as? String == "out\nerr\nout2\n")
        }
    }

    @Test func stdinIsDevNull() async throws {
        try await withProcessServer { h in
            let out = try await h.finalOutput(try await h.start("cat; echo rc=$?"))
            #expect(out["output"] as? String == "rc=0\n")
        }
    }

    @Test func childrenHaveTheirOwnProcessGroupAndCleanSignals() async throws {
        try await withProcessServer { h in
            // pgid == pid of the shell; no blocked or ignored signals inherited from Swift threads.
            let script = #"awk '{print $5 == $1 ? "leader" : "member"}' /proc/$$/stat; grep -E '^Sig(Blk|Ign)' /proc/self/status"#
            let out = try await h.finalOutput(try await h.start(script))
            let text = try #require(out["output"] as? String)
            #expect(text.hasPrefix("leader\n"))
            #expect(text.contains("SigBlk:\t0000000000000000"))
            #expect(text.contains("SigIgn:\t0000000000000000"))
        }
    }

    @Test func priorityAdjustmentsApply() async throws {
        try await withProcessServer(configure: { $0.priority = ProcessPriority(oomScoreAdj: 900, nice: 7) }) { h in
            let out = try await h.finalOutput(try await h.start("cat /proc/self/oom_score_adj; awk '{print $19}' /proc/self/stat"))
            #expect(out["output"] as? String == "900\n7\n")
        }
    }

    @Test func missingWorkdirIs500() async throws {
        try await withProcessServer { h in
            let r = try await h.client.request(
                "POST", "/api/v0/processes/start", json: #"{"command":"true","workdir":"/does/not/exist"}"#)
            #expect(r.status == 500)
            let json = try #require(jsonObject(r.body))
            #expect(json["message"] as? String == "Failed to start process.")
            #expect(json["detail"] as? String == "start process: chdir /does/not/exist: no such file or directory")
        }
    }

    @Test func missingShellIs500() async throws {
        try await withProcessServer(configure: { $0.baseEnvironment["PATH"] = "/nonexistent" }) { h in
            let r = try await h.client.request("POST", "/api/v0/processes/start", json: #"{"command":"true"}"#)
            #expect(r.status == 500)
            #expect(jsonObject(r.body)?["detail"] as? String == #"start process: exec: "sh": executable file not found in $PATH"#)
        }
    }

    @Test func healthz() async throws {
        try await withProcessServer { h in
            let r = try await h.client.request("GET", "/healthz")
            #expect(r.status == 200)
        }
    }
}

/// A provider whose variables and generation a test changes between starts.
final class SteppedEnvironmentProvider: AgentEnvironmentProvider {
    private let state: Mutex<AgentEnvironmentLayer>

    init(_ variables: [String: String], generation: UInt64) {
        state = Mutex(AgentEnvironmentLayer(generation: generation, variables: variables))
    }

    func set(_ variables: [String: String], generation: UInt64) {
        state.withLock { $0 = AgentEnvironmentLayer(generation: generation, variables: variables) }
    }

    func agentEnvironment() async throws -> [String: String] { state.withLock { $0.variables } }
    func agentEnvironmentLayer() async throws -> AgentEnvironmentLayer { state.withLock { $0 } }
    func defaultDirectory() async -> String? { nil }
}

/// Another provider's variables without its generation (the protocol's default layer).
struct UnversionedEnvironmentProvider: AgentEnvironmentProvider {
    let inner: SteppedEnvironmentProvider

    init(_ inner: SteppedEnvironmentProvider) { self.inner = inner }

    func agentEnvironment() async throws -> [String: String] { try await inner.agentEnvironment() }
    func defaultDirectory() async -> String? { nil }
}
