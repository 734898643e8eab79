import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// With the agent binary: processes, their output and their tool calls across an
/// agent that is killed (SIGKILL) and started again on the same state directory.
@Suite(.timeLimit(.minutes(5)))
struct WorkspaceAgentProcessRestartTests {
    static let base = "/api/v0/processes"

    @Test func aKilledAgentReportsLostProcessesAndNeverRunsARetriedCallTwice() async throws {
        let state = NSTemporaryDirectory() + "agent-proc-restart-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: state) }
        let counter = state + "-runs"
        defer { unlink(counter) }
        let marker = "sleep 337.\(Int.random(in: 1000...9999))"
        let chat = UUID().uuidString.lowercased()
        let headers = [
            ("Coder-Chat-Id", chat), ("Coder-Tool-Call-Message-Id", "3"), ("Coder-Tool-Call-Id", "toolu_01"),
            ("Coder-Tool-Call-Age-Ms", "0"),
        ]
        let body = #"{"command":"echo once >> \#(counter); seq 1 5000; \#(marker)"}"#

        let first = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--state-dir", state])
        defer { first.cleanup() }
        let client = RawHTTPClient(port: try await first.port())
        let started = try await client.request("POST", "\(Self.base)/start", headers: headers, json: body)
        try #require(started.status == 200, "\(started)")
        let id = try #require(jsonObject(started.body)?["id"] as? String)
        let printed = try await client.request(
            "GET", "\(Self.base)/\(id)/output?until_literal=5000&timeout=60s", headers: [("Coder-Chat-Id", chat)], timeout: .seconds(90))
        #expect(jsonObject(printed.body)?["condition"] as? String == "matched")
        // A terminal's process, which will be lost too.
        let onTerminal = "sleep 338.\(Int.random(in: 1000...9999))"
        let terminal = try await client.request("POST", "\(Self.base)/start", json: #"{"command":"\#(onTerminal)","pty":{"rows":24,"cols":80}}"#)
        let terminalID = try #require(jsonObject(terminal.body)?["id"] as? String, "\(terminal)")
        // The agent dies without a word; its process group lives on (it is not ours any more).
        first.signal(SIGKILL)
        _ = await first.exitStatus()
        defer { _ = try? shell("pkill -f '\(marker)'; pkill -f '\(onTerminal)'") }

        let second = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--state-dir", state])
        defer { second.cleanup() }
        let again = RawHTTPClient(port: try await second.port())
        // The retried call gets the first start's id, and the command does not run again.
        let retry = try await again.request("POST", "\(Self.base)/start", headers: headers, json: body)
        try #require(retry.status == 200, "\(retry)")
        let retried = try #require(jsonObject(retry.body))
        #expect(retried["id"] as? String == id && retried["attached"] as? Bool == true)
        #expect(retried["state"] as? String == "lost", "the agent could not see it end: \(retried)")
        // Its output up to the kill, byte for byte, by offset.
        let read = try await again.request("GET", "\(Self.base)/\(id)/output?offset=0&limit=1048576", headers: [("Coder-Chat-Id", chat)])
        let json = try #require(jsonObject(read.body))
        #expect(json["output"] as? String == (1...5000).map { "\($0)\n" }.joined())
        #expect(json["state"] as? String == "lost" && json["running"] as? Bool == false && json["exit_code"] == nil)
        let listed = try await again.request("GET", "\(Self.base)/list", headers: [("Coder-Chat-Id", chat)])
        let entry = (jsonObject(listed.body)?["processes"] as? [[String: Any]])?.first { $0["id"] as? String == id }
        #expect(entry?["state"] as? String == "lost")
        // Not ours any more: no signal reaches a process the agent cannot prove it owns.
        let signal = try await again.request("POST", "\(Self.base)/\(id)/signal", headers: [("Coder-Chat-Id", chat)], json: #"{"signal":"kill"}"#)
        #expect(signal.status == 409)
        #expect(try String(contentsOfFile: counter, encoding: .utf8) == "once\n")
        // Its terminal did not survive the restart: input and resize say so.
        let input = try await again.request("POST", "\(Self.base)/\(terminalID)/stdin", body: Array("x".utf8))
        #expect(input.status == 409)
        #expect(jsonObject(input.body)?["message"] as? String == "Input of process \"\(terminalID)\" is closed.", "\(input)")
        #expect((jsonObject(input.body)?["detail"] as? String)?.contains("did not survive the restart") == true, "\(input)")
        let resize = try await again.request("POST", "\(Self.base)/\(terminalID)/resize", json: #"{"rows":30,"cols":100}"#)
        #expect(resize.status == 409)
        #expect((jsonObject(resize.body)?["detail"] as? String)?.contains("terminal did not survive") == true, "\(resize)")

        // A graceful stop keeps the real exit: not lost.
        let plain = try await again.request("POST", "\(Self.base)/start", json: #"{"command":"echo graceful; sleep 600"}"#)
        let plainID = try #require(jsonObject(plain.body)?["id"] as? String)
        _ = try await again.request("GET", "\(Self.base)/\(plainID)/output?until_literal=graceful&timeout=60s", timeout: .seconds(90))
        second.signal(SIGTERM)
        #expect(await second.exitStatus(timeout: .seconds(60)) == 0)
        let third = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--state-dir", state])
        defer { third.cleanup() }
        let last = RawHTTPClient(port: try await third.port())
        let after = try #require(jsonObject(try await last.request("GET", "\(Self.base)/\(plainID)/output").body))
        #expect(after["state"] as? String == "exited" && after["exit_signal"] as? String == "SIGTERM", "\(after)")
        #expect(after["output"] as? String == "graceful\n")
        third.signal(SIGTERM)
        _ = await third.exitStatus(timeout: .seconds(60))
    }
}

/// Runs a shell command (test housekeeping).
@discardableResult
func shell(_ command: String) throws -> Int32 {
    var pid: pid_t = 0
    let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sh"), strdup("-c"), strdup(command), nil]
    defer { for arg in argv { free(arg) } }
    guard posix_spawn(&pid, "/bin/sh", nil, nil, argv, environ) == 0 else { return -1 }
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    return status
}
