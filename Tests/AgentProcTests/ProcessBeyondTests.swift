import AgentCore
@testable import AgentProc
import AgentTestSupport
import Foundation
import Synchronization
import Testing

/// Stdin, terminals, awaits, cursor reads and at-most-once starts, through the
/// HTTP API with real children.
@Suite(.timeLimit(.minutes(5)))
struct ProcessBeyondTests {
    static let base = "/api/v0/processes"

    // MARK: Helpers

    static func startJSON(_ h: Harness, _ body: String, headers: [(String, String)] = []) async throws -> [String: Any] {
        let response = try await h.client.request("POST", "\(base)/start", headers: headers, json: body)
        try #require(response.status == 200, "start: \(response)")
        return try #require(jsonObject(response.body))
    }

    static func start(_ h: Harness, _ body: String) async throws -> String {
        try #require(try await startJSON(h, body)["id"] as? String)
    }

    /// An await (`GET /{id}/output?...`) and its JSON.
    static func awaitOutput(_ h: Harness, _ id: String, _ query: String) async throws -> [String: Any] {
        let response = try await h.client.request("GET", "\(base)/\(id)/output?\(query)", timeout: .seconds(120))
        try #require(response.status == 200, "await \(query): \(response)")
        return try #require(jsonObject(response.body))
    }

    static func stdin(_ h: Harness, _ id: String, _ text: String, timeout: Duration = .seconds(60)) async throws -> RawHTTPClient.Response {
        try await h.client.request("POST", "\(base)/\(id)/stdin", body: Array(text.utf8), timeout: timeout)
    }

    static func query(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
    }

    // MARK: stdin

    @Test func stdinRoundTripThroughCat() async throws {
        try await withProcessServer { h in
            let id = try await Self.start(h, #"{"command":"cat","stdin":true}"#)
            let first = try await Self.stdin(h, id, "hello through stdin\n")
            #expect(first.status == 200)
            #expect(jsonInt(jsonObject(first.body)?["written"]) == 20)
            let seen = try await Self.awaitOutput(h, id, "until_literal=\(Self.query("hello through stdin"))&timeout=60s")
            #expect(seen["condition"] as? String == "matched")
            // In order, across calls.
            for n in 1...20 { #expect(try await Self.stdin(h, id, "line \(n)\n").status == 200) }
            let close = try await h.client.request("POST", "\(Self.base)/\(id)/stdin/close", json: "{}")
            #expect(close.status == 200)
            let out = try await h.finalOutput(id)
            #expect(jsonInt(out["exit_code"]) == 0, "cat ends at end-of-file")
            #expect(out["output"] as? String == "hello through stdin\n" + (1...20).map { "line \($0)\n" }.joined())
            // Closed (and exited): 409 with a clear message.
            let late = try await Self.stdin(h, id, "late\n")
            #expect(late.status == 409)
            #expect((jsonObject(late.body)?["message"] as? String)?.contains("is closed") == true)
        }
    }

    /// A child that exits in the middle of a write (its reader gone after part went in) is
    /// the closed input's 409, saying how much went in; it was a 500 "broken pipe".
    @Test func aChildExitingMidWriteIsAClosedInput() async throws {
        try await withProcessServer { h in
            let id = try await Self.start(h, #"{"command":"head -c 1 >/dev/null","stdin":true}"#)
            // Far more than the 64 KiB pipe: part goes in, then the reader is gone.
            let write = try await Self.stdin(h, id, String(repeating: "x", count: 512 << 10))
            #expect(write.status == 409, "\(write.bodyText)")
            let detail = jsonObject(write.body)?["detail"] as? String ?? ""
            #expect(detail.contains("bytes were written; the rest was not"), "\(write.bodyText)")
        }
    }

    @Test func awaitsAreBoundedPerProcess() async throws {
        try await withProcessServer { h in
            let id = try await Self.start(h, #"{"command":"sleep 120"}"#)
            let process = try #require(h.manager.lookup(id, chat: nil))
            try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<ManagedProcess.maxWatches {
                    group.addTask { try await Self.awaitOutput(h, id, "until_literal=never&timeout=120s")["condition"] as? String }
                }
                #expect(await eventually(timeout: .seconds(60)) { process.watchCount == ManagedProcess.maxWatches })
                let refused = try await h.client.request("GET", "\(Self.base)/\(id)/output?until_literal=never&timeout=1s")
                #expect(refused.status == 429)
                #expect(jsonObject(refused.body)?["message"] as? String == "Too many awaits.")
                #expect(try await h.signal(id, #"{"signal":"kill"}"#).status == 200)
                for try await condition in group { #expect(condition == "exited") }
            }
            #expect(process.watchCount == 0)
            #expect(h.manager.activeAwaits.load(ordering: .relaxed) == 0)
        }
    }

    @Test func awaitsOnAPortAloneAreBoundedInAll() async throws {
        try await withProcessServer(configure: { $0.maxAwaits = 2 }) { h in
            let id = try await Self.start(h, #"{"command":"sleep 120"}"#)
            let port = freeLoopbackPort()
            try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<2 {
                    group.addTask { try await Self.awaitOutput(h, id, "port=\(port)&timeout=120s")["condition"] as? String }
                }
                #expect(await eventually(timeout: .seconds(60)) { h.manager.activeAwaits.load(ordering: .relaxed) == 2 })
                let refused = try await h.client.request("GET", "\(Self.base)/\(id)/output?port=\(port)&timeout=1s")
                #expect(refused.status == 429)
                #expect(jsonObject(refused.body)?["message"] as? String == "Too many awaits.")
                // An exit wait with a timeout is not an await on anything: not bounded.
                let exitWait = try await h.client.request("GET", "\(Self.base)/\(id)/output?wait=true&timeout=1ms")
                #expect(exitWait.status == 200)
                #expect(try await h.signal(id, #"{"signal":"kill"}"#).status == 200)
                for try await condition in group { #expect(condition == "exited") }
            }
            #expect(h.manager.activeAwaits.load(ordering: .relaxed) == 0)
        }
    }

    @Test func theStreamTakesBinaryFramesAsInput() async throws {
        try await withProcessServer { h in
            let id = try await Self.start(h, #"{"command":"cat","stdin":true}"#)
            let seen = try await TestWebSocket.withConnection(port: h.port, path: "\(Self.base)/\(id)/stream") { ws -> String in
                try await ws.send(opcode: 0x2, payload: Array("typed on the socket\n".utf8))
                // Text frames are not input.
                try await ws.send(opcode: 0x1, payload: Array("ignored\n".utf8))
                try await ws.send(opcode: 0x2, payload: Array("second\n".utf8))
                var text = ""
                while !text.contains("second\n"), let message = try await ws.next() {
                    if case .binary(let bytes) = message { text += String(decoding: bytes, as: UTF8.self) }
                }
                try await ws.close()
                return text
            }
            #expect(seen == "typed on the socket\nsecond\n")
            // Input to a process without stdin is refused with a text event, not dropped silently.
            let plain = try await Self.start(h, #"{"command":"sleep 600"}"#)
            let event = try await TestWebSocket.withConnection(port: h.port, path: "\(Self.base)/\(plain)/stream") { ws -> String? in
                try await ws.send(opcode: 0x2, payload: Array("x".utf8))
                while let message = try await ws.next() {
                    if case .text(let text) = message { try await ws.close(); return text }
                }
                return nil
            }
            let json = try #require(event.flatMap { jsonObject(Array($0.utf8)) })
            #expect(json["type"] as? String == "stdin_error")
            #expect((json["message"] as? String)?.contains("not started with stdin") == true)
            #expect(try await h.signal(id, #"{"signal":"kill"}"#).status == 200)
            #expect(try await h.signal(plain, #"{"signal":"kill"}"#).status == 200)
        }
    }

    /// Input goes to stdin only as whole messages: fragments are joined, and a message the
    /// connection refuses (here a new message before the last one ended: 1002) writes
    /// nothing of what came before its end (before, each fragment was written as it came).
    @Test func theStreamWritesOnlyWholeMessagesToStdin() async throws {
        try await withProcessServer { h in
            let id = try await Self.start(h, #"{"command":"cat","stdin":true}"#)
            let frame = TestWebSocket.maskedFrame
            try await TestWebSocket.withConnection(port: h.port, path: "\(Self.base)/\(id)/stream") { ws in
                try await ws.send(raw: frame(false, 0x2, Array("ab".utf8)) + frame(true, 0x0, Array("c\n".utf8)))
                var text = ""
                while !text.contains("abc\n"), let message = try await ws.next() {
                    if case .binary(let bytes) = message { text += String(decoding: bytes, as: UTF8.self) }
                }
                #expect(text == "abc\n")
                try await ws.send(raw: frame(false, 0x2, Array("PARTIAL".utf8)) + frame(true, 0x2, Array("NEW\n".utf8)))
                // Bounded: the connection ends on the protocol error.
                for _ in 0..<100 { if try await ws.next() == nil { break } }
                #expect(ws.closeCode == 1002)
            }
            #expect(try await h.client.request("POST", "\(Self.base)/\(id)/stdin/close", json: "{}").status == 200)
            let out = try await h.finalOutput(id)
            #expect(out["output"] as? String == "abc\n")
        }
    }

    @Test func stdinWithoutAskingIsRefusedAndResizeNeedsATerminal() async throws {
        try await withProcessServer { h in
            let id = try await Self.start(h, #"{"command":"sleep 600"}"#)
            let write = try await Self.stdin(h, id, "x")
            #expect(write.status == 409)
            #expect((jsonObject(write.body)?["message"] as? String)?.contains("not started with stdin") == true)
            let resize = try await h.client.request("POST", "\(Self.base)/\(id)/resize", json: #"{"rows":10,"cols":10}"#)
            #expect(resize.status == 409)
            let piped = try await Self.start(h, #"{"command":"sleep 600","stdin":true}"#)
            let bad = try await h.client.request("POST", "\(Self.base)/\(piped)/resize", json: #"{"rows":0,"cols":10}"#)
            #expect(bad.status == 400)
            #expect(try await h.client.request("POST", "\(Self.base)/\(piped)/resize", json: #"{"rows":10,"cols":10}"#).status == 409)
            #expect(try await h.client.request("POST", "\(Self.base)/nope/stdin", body: [1]).status == 404)
            #expect(try await h.signal(id, #"{"signal":"kill"}"#).status == 200)
            #expect(try await h.signal(piped, #"{"signal":"kill"}"#).status == 200)
        }
    }

    @Test func aPythonREPLAnswersThroughStdin() async throws {
        try await withProcessServer { h in
            // -i: interactive without a terminal (prompts on stderr, which is the same pipe).
            let id = try await Self.start(h, #"{"command":"exec python3 -i -q -u","stdin":true}"#)
            #expect(try await Self.stdin(h, id, "print(6 * 7)\n").status == 200)
            let answer = try await Self.awaitOutput(h, id, "until=\(Self.query("^(>>> )*42$"))&timeout=60s")
            #expect(answer["condition"] as? String == "matched", "\(answer)")
            #expect(try await Self.stdin(h, id, "import sys; sys.exit(3)\n").status == 200)
            let out = try await h.finalOutput(id)
            #expect(jsonInt(out["exit_code"]) == 3)
        }
    }

    @Test func aChildThatNeverReadsGetsABoundedWaitAndAClearError() async throws {
        try await withProcessServer(configure: { $0.stdinWriteTimeout = .seconds(1) }) { h in
            let id = try await Self.start(h, #"{"command":"sleep 600","stdin":true}"#)
            let big = String(repeating: "y", count: 1 << 20)
            let response = try await Self.stdin(h, id, big)
            #expect(response.status == 504, "\(response)")
            let body = try #require(jsonObject(response.body))
            #expect((body["message"] as? String)?.contains("did not read its input in time") == true)
            // The pipe took what it could (a pipe holds 64 KiB by default); the detail says so.
            #expect((body["detail"] as? String)?.contains("bytes were written") == true)
            // Too large for one call: 413 before anything is written.
            let huge = try await h.client.request("POST", "\(Self.base)/\(id)/stdin", body: [UInt8](repeating: 1, count: (1 << 20) + 1))
            #expect(huge.status == 413)
            #expect(try await h.signal(id, #"{"signal":"kill"}"#).status == 200)
        }
    }

    // MARK: Terminal

    @Test func aRealTerminalWithResize() async throws {
        try await withProcessServer { h in
            let program = """
                import os, signal, sys
                signal.signal(signal.SIGWINCH, lambda *a: print("winch", os.get_terminal_size(0), flush=True))
                print("ready", os.isatty(0), os.environ.get("TERM"), flush=True)
                for line in sys.stdin:
                    print("echo:" + line.strip(), flush=True)
                print("eof", flush=True)
                """
            let command = "tty; stty size; exec python3 -u -c '\(program)'"
            let body = try JSONSerialization.data(withJSONObject: ["command": command, "pty": ["rows": 24, "cols": 80]])
            let started = try await h.client.request("POST", "\(Self.base)/start", body: Array(body))
            try #require(started.status == 200, "\(started)")
            let id = try #require(jsonObject(started.body)?["id"] as? String)
            let tty = try await Self.awaitOutput(h, id, "until=\(Self.query(#"^/dev/pts/\d+$"#))&timeout=60s")
            #expect(tty["condition"] as? String == "matched", "tty prints a terminal: \(tty)")
            let size = try await Self.awaitOutput(h, id, "until_literal=\(Self.query("24 80"))&timeout=60s")
            #expect(size["condition"] as? String == "matched", "stty size prints the requested size: \(size)")
            let ready = try await Self.awaitOutput(h, id, "until_literal=\(Self.query("ready True xterm-256color"))&timeout=60s")
            #expect(ready["condition"] as? String == "matched", "\(ready)")
            // A resize reaches the child as SIGWINCH with the new size.
            let resize = try await h.client.request("POST", "\(Self.base)/\(id)/resize", json: #"{"rows":50,"cols":132}"#)
            #expect(resize.status == 200)
            let winch = try await Self.awaitOutput(h, id, "until_literal=\(Self.query("winch os.terminal_size(columns=132, lines=50)"))&timeout=60s")
            #expect(winch["condition"] as? String == "matched", "\(winch)")
            // stdin goes to the terminal (echoed by it, then by the program).
            #expect(try await Self.stdin(h, id, "typed\n").status == 200)
            let echo = try await Self.awaitOutput(h, id, "until=\(Self.query("^echo:typed$"))&timeout=60s")
            #expect(echo["condition"] as? String == "matched", "\(echo)")
            // stdin/close sends end-of-file (^D) through the terminal.
            #expect(try await h.client.request("POST", "\(Self.base)/\(id)/stdin/close", json: "{}").status == 200)
            let out = try await h.finalOutput(id)
            #expect(jsonInt(out["exit_code"]) == 0)
            #expect((out["output"] as? String)?.contains("eof") == true)
            // Listed as a terminal process.
            let entry = try await h.list().first { $0["id"] as? String == id }
            #expect(entry?["pty"] as? Bool == true && entry?["stdin"] as? Bool == true)
        }
    }

    /// stdin/close after an unfinished line on a terminal in line mode: the first ^D only
    /// hands the line over (as at a keyboard), so two are sent and the child reads
    /// end-of-file. With one, `cat` waited for ever and no more input was taken.
    @Test func closingATerminalAfterAnUnfinishedLineEndsTheInput() async throws {
        try await withProcessServer { h in
            let body = try JSONSerialization.data(withJSONObject: ["command": "cat; echo cat-ended $?", "pty": ["rows": 24, "cols": 80]])
            let started = try await h.client.request("POST", "\(Self.base)/start", body: Array(body))
            let id = try #require(jsonObject(started.body)?["id"] as? String)
            #expect(try await Self.stdin(h, id, "abc").status == 200)
            #expect(try await h.client.request("POST", "\(Self.base)/\(id)/stdin/close", json: "{}").status == 200)
            let ended = try await Self.awaitOutput(h, id, "until_literal=\(Self.query("cat-ended 0"))&timeout=60s")
            #expect(ended["condition"] as? String == "matched", "\(ended)")
            #expect(try await h.signal(id, #"{"signal":"kill"}"#).status != 500)
        }
    }

    @Test func signalsStillReachTheTerminalsWholeGroup() async throws {
        let marker = "sleep 331.\(Int.random(in: 1000...9999))"
        try await withProcessServer { h in
            let body = try JSONSerialization.data(withJSONObject: ["command": "\(marker) & \(marker) & wait", "pty": ["rows": 10, "cols": 40]])
            let started = try await h.client.request("POST", "\(Self.base)/start", body: Array(body))
            let id = try #require(jsonObject(started.body)?["id"] as? String)
            #expect(await eventually { processExists(commandLine: marker) })
            #expect(try await h.signal(id, #"{"signal":"kill"}"#).status == 200)
            _ = try await h.finalOutput(id)
            #expect(await eventually { !processExists(commandLine: marker) })
        }
    }

    // MARK: Await

    @Test func untilMatchesAPatternSplitAcrossTwoWrites() async throws {
        try await withProcessServer { h in
            let id = try await Self.start(h, #"{"command":"printf 'boot\\nready: serv'; sleep 0.1; printf 'er up\\nrest\\n'; sleep 60"}"#)
            let answer = try await Self.awaitOutput(h, id, "until=\(Self.query("server up$"))&timeout=60s")
            #expect(answer["condition"] as? String == "matched", "\(answer)")
            let match = try #require(answer["match"] as? [String: Any])
            #expect(match["line"] as? String == "ready: server up")
            #expect(jsonInt(match["offset"]) == 5, "the line starts after \"boot\\n\"")
            #expect(answer["running"] as? Bool == true)
            // Already in the output: answered at once; from= past it: not matched again.
            let again = try await Self.awaitOutput(h, id, "until_literal=boot&timeout=30s")
            #expect(again["condition"] as? String == "matched")
            let later = try await Self.awaitOutput(h, id, "until_literal=boot&from=5&timeout=200ms")
            #expect(later["condition"] as? String == "timeout")
            #expect(try await h.signal(id, #"{"signal":"kill"}"#).status == 200)
        }
    }

    @Test func untilEndsWithExitAndAPromptWithoutANewlineMatches() async throws {
        try await withProcessServer { h in
            let prompt = try await Self.start(h, #"{"command":"printf 'Continue? [y/N] '; sleep 60"}"#)
            let asked = try await Self.awaitOutput(h, prompt, "until=\(Self.query(#"\[y/N\]\s*$"#))&timeout=60s")
            #expect(asked["condition"] as? String == "matched", "\(asked)")
            #expect((asked["match"] as? [String: Any])?["line"] as? String == "Continue? [y/N] ")
            #expect(try await h.signal(prompt, #"{"signal":"kill"}"#).status == 200)
            let quiet = try await Self.start(h, #"{"command":"echo nothing here; exit 4"}"#)
            let ended = try await Self.awaitOutput(h, quiet, "until_literal=never&timeout=60s")
            #expect(ended["condition"] as? String == "exited")
            #expect(jsonInt(ended["exit_code"]) == 4)
            #expect(ended["match"] == nil)
        }
    }

    @Test func portOpensLateAndTimeoutsAreReported() async throws {
        try await withProcessServer { h in
            let port = freeLoopbackPort()
            let server = "import socket, time; time.sleep(0.5); s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', \(port))); s.listen(); print('listening', flush=True); time.sleep(60)"
            let body = try JSONSerialization.data(withJSONObject: ["command": "exec python3 -c \"\(server)\""])
            let started = try await h.client.request("POST", "\(Self.base)/start", body: Array(body))
            let id = try #require(jsonObject(started.body)?["id"] as? String)
            let answer = try await Self.awaitOutput(h, id, "port=\(port)&timeout=60s")
            #expect(answer["condition"] as? String == "port_open", "\(answer)")
            let nothing = try await Self.awaitOutput(h, id, "port=\(freeLoopbackPort())&timeout=300ms")
            #expect(nothing["condition"] as? String == "timeout")
            #expect(try await h.signal(id, #"{"signal":"kill"}"#).status == 200)
        }
    }

    @Test func badAwaitQueriesAre400() async throws {
        try await withProcessServer { h in
            let id = try await Self.start(h, #"{"command":"true"}"#)
            for query in [
                "until=\(Self.query("(a"))", "until=\(Self.query("(a)\\1"))", "until=a&until_literal=b", "port=0", "port=70000",
                "until=a&timeout=10m", "until=a&timeout=-1s", "until=a&timeout=soon", "from=3", "offset=-1", "limit=5",
                "offset=0&until=a", "until_literal=",
                // limit outside 1...4 MiB, on either side (the OpenAPI document's bounds).
                "offset=0&limit=0", "offset=0&limit=4194305", "offset=0&limit=99999999999",
            ] {
                let response = try await h.client.request("GET", "\(Self.base)/\(id)/output?\(query)")
                #expect(response.status == 400, "\(query): \(response)")
            }
            let largest = try await h.client.request("GET", "\(Self.base)/\(id)/output?offset=0&limit=4194304")
            #expect(largest.status == 200, "\(largest)")
            let over = try await h.client.request("GET", "\(Self.base)/\(id)/output?offset=0&limit=4194305")
            #expect((jsonObject(over.body)?["detail"] as? String) == "limit must be 1 to 4194304.", "\(over)")
            let regex = try await h.client.request("GET", "\(Self.base)/\(id)/output?until=\(Self.query("(a)\\1"))")
            #expect((jsonObject(regex.body)?["detail"] as? String)?.contains("backreferences are not supported") == true)
        }
    }

    // MARK: Cursor reads

    @Test func cursorReadsReturnTheWholeOutputByOffset() async throws {
        try await withProcessServer { h in
            let id = try await Self.start(h, #"{"command":"seq 1 60000"}"#)
            _ = try await h.finalOutput(id)
            var offset = 0
            var text = ""
            for _ in 0..<100 {
                let response = try await h.client.request("GET", "\(Self.base)/\(id)/output?offset=\(offset)&limit=65536")
                let json = try #require(jsonObject(response.body))
                #expect(jsonInt(json["dropped_bytes"]) == 0)
                let next = try #require(jsonInt(json["next_offset"]))
                if next == offset { break }
                text += json["output"] as? String ?? ""
                offset = next
            }
            let expected = (1...60000).map { "\($0)\n" }.joined()
            #expect(text == expected)
            #expect(offset == expected.utf8.count)
            // Past the end: nothing, and next_offset stays at the end.
            let past = try #require(jsonObject(try await h.client.request("GET", "\(Self.base)/\(id)/output?offset=99999999").body))
            #expect(past["output"] as? String == "" && jsonInt(past["next_offset"]) == expected.utf8.count)
        }
    }

    @Test func theTailOfOutputSplicedIntoTheSpoolIsReadBackExactly() async throws {
        try await withProcessServer { h in
            // Nobody reads it live: most of it goes into the spool without passing the tail.
            let id = try await Self.start(h, #"{"command":"seq 1 1000000"}"#)
            let out = try await h.finalOutput(id)
            // 6.9 MB built on a thread of its own: seconds of work in a debug build would hold
            // one of the cooperative threads the server under test needs.
            let expected = await onThread { Array((1...1_000_000).map { "\($0)\n" }.joined().utf8) }
            let text = Array((out["output"] as? String ?? "").utf8)
            let headKept = text.starts(with: expected.prefix(16384))
            #expect(headKept, "the head is the first 16 KiB")
            let tailKept = Array(text.suffix(16384)) == Array(expected.suffix(16384))
            #expect(tailKept, "the tail is the last 16 KiB")
            let truncated = try #require(out["truncated"] as? [String: Any])
            #expect(jsonInt(truncated["original_bytes"]) == expected.count)
            #expect(jsonInt(truncated["omitted_bytes"]) == expected.count - 32768)
            // A stream attached now starts with the same tail.
            let stream = try await TestWebSocket.withConnection(port: h.port, path: "\(Self.base)/\(id)/stream") { ws -> [UInt8] in
                var bytes: [UInt8] = []
                while let message = try await ws.next() {
                    if case .binary(let part) = message { bytes += part }
                }
                return bytes
            }
            let streamTail = Array(stream.suffix(16384)) == Array(expected.suffix(16384))
            #expect(streamTail, "a stream starts with the same tail")
        }
    }

    @Test func theOldestBytesAreDroppedFirstAndReported() async throws {
        try await withProcessServer(configure: {
            $0.spoolLimits.segmentBytes = 64 * 1024
            $0.spoolLimits.maxBytesPerSpool = 256 * 1024
        }) { h in
            let id = try await Self.start(h, #"{"command":"seq 1 200000"}"#)
            _ = try await h.finalOutput(id)
            let expected = Array((1...200000).map { "\($0)\n" }.joined().utf8)
            let response = try await h.client.request("GET", "\(Self.base)/\(id)/output?offset=0&limit=4194304")
            let json = try #require(jsonObject(response.body))
            let dropped = try #require(jsonInt(json["dropped_bytes"]))
            #expect(dropped > 0 && dropped <= expected.count - 192 * 1024)
            let kept = Array((json["output"] as? String ?? "").utf8)
            #expect(kept == Array(expected[dropped...]), "an offset older than the oldest kept byte reads from it")
            #expect(jsonInt(json["next_offset"]) == expected.count)
        }
    }

    /// An await from the start matches the head `/output` still shows after the spool
    /// dropped its first bytes (it timed out: only the spool was read back).
    @Test func anAwaitMatchesTheHeadTheSpoolDropped() async throws {
        try await withProcessServer(configure: {
            $0.spoolLimits.segmentBytes = 64 * 1024
            $0.spoolLimits.maxBytesPerSpool = 256 * 1024
        }) { h in
            let id = try await Self.start(h, #"{"command":"echo MARK-START; seq 1 200000"}"#)
            _ = try await h.finalOutput(id)
            let window = try await h.client.request("GET", "\(Self.base)/\(id)/output?offset=0&limit=16")
            #expect((jsonInt(jsonObject(window.body)?["dropped_bytes"]) ?? 0) > 0, "the spool dropped the start")
            let seen = try await Self.awaitOutput(h, id, "until_literal=MARK-START&timeout=30s")
            #expect(seen["condition"] as? String == "matched", "\(seen)")
        }
    }

    @Test func aThousandProcessesStayWithinTheTotalCap() async throws {
        let state = try makeTempDirectory()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let total = 2 << 20
        try await withProcessServer(configure: {
            $0.stateDirectory = state
            $0.spoolLimits.segmentBytes = 64 * 1024
            $0.spoolLimits.maxBytesPerSpool = 256 * 1024
            $0.spoolLimits.maxTotalBytes = total
        }) { h in
            // 20 at a time: 50 concurrent starts kept a loaded host's answers past the client's time.
            for batch in 0..<50 {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for n in 0..<20 {
                        group.addTask {
                            let id = try await Self.start(h, #"{"command":"head -c 20000 /dev/zero | tr '\\0' x; echo \#(batch * 20 + n)"}"#)
                            _ = try await h.finalOutput(id)
                        }
                    }
                    try await group.waitForAll()
                }
            }
            #expect((h.manager.spools?.totalBytes ?? 0) <= total)
            let used = directoryBytes(state + "/processes/spool")
            // Segment files within the cap, plus the small cursor and record files.
            #expect(used <= total + 300 * 8192, "disk use \(used) for a cap of \(total)")
        }
    }

    @Test func withoutASpoolAwaitsReadTheMemoryAndOffsetReadsAre409() async throws {
        try await withProcessServer(configure: { $0.spoolOutput = false }) { h in
            let id = try await Self.start(h, #"{"command":"echo early-line; sleep 60"}"#)
            let early = try await Self.awaitOutput(h, id, "until_literal=early-line&timeout=60s")
            #expect(early["condition"] as? String == "matched")
            let read = try await h.client.request("GET", "\(Self.base)/\(id)/output?offset=0")
            #expect(read.status == 409)
            #expect(try await h.signal(id, #"{"signal":"kill"}"#).status == 200)
        }
    }

    // MARK: At-most-once

    @Test func aRetriedToolCallStartsOneProcessAlsoAfterARestart() async throws {
        let state = try makeTempDirectory()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let counter = state + "/runs"
        let chat = UUID().uuidString.lowercased()
        let headers = [
            ("Coder-Chat-Id", chat), ("Coder-Tool-Call-Message-Id", "7"), ("Coder-Tool-Call-Id", "call_1"),
            ("Coder-Tool-Call-Age-Ms", "0"),
        ]
        let body = #"{"command":"echo ran; echo once >> \#(counter)"}"#
        var firstID = ""
        try await withProcessServer(configure: { $0.stateDirectory = state }) { h in
            let first = try await Self.startJSON(h, body, headers: headers)
            firstID = try #require(first["id"] as? String)
            #expect(first["attached"] == nil)
            // Concurrent and later retries: the same process.
            try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<5 { group.addTask { try await Self.startJSON(h, body, headers: headers)["id"] as? String } }
                for try await id in group { #expect(id == firstID) }
            }
            _ = try await h.finalOutput(firstID, chat: chat)
            let retry = try await Self.startJSON(h, body, headers: headers)
            #expect(retry["id"] as? String == firstID && retry["attached"] as? Bool == true)
            #expect(retry["state"] as? String == "exited" && jsonInt(retry["exit_code"]) == 0)
            // The same call with another command: 409.
            let other = try await h.client.request("POST", "\(Self.base)/start", headers: headers, json: #"{"command":"echo other"}"#)
            #expect(other.status == 409)
            #expect(jsonObject(other.body)?["code"] as? String == "input_mismatch")
            #expect(jsonObject(other.body)?["detail"] is String, "the API's usual {message, detail} beside the code")
            // Partial headers: 400.
            let partial = try await h.client.request("POST", "\(Self.base)/start", headers: Array(headers.prefix(2)), json: body)
            #expect(partial.status == 400)
            // A call id too long to keep in the ledger: 400, nothing runs.
            var long = headers
            long[2] = ("Coder-Tool-Call-Id", String(repeating: "c", count: 1025))
            let tooLong = try await h.client.request("POST", "\(Self.base)/start", headers: long, json: body)
            #expect(tooLong.status == 400)
        }
        // A new manager on the same state directory: the agent restarted.
        try await withProcessServer(configure: { $0.stateDirectory = state }) { h in
            let retry = try await Self.startJSON(h, body, headers: headers)
            #expect(retry["id"] as? String == firstID)
            #expect(retry["attached"] as? Bool == true && retry["state"] as? String == "exited")
            let out = try await h.finalOutput(firstID, chat: chat)
            #expect(out["output"] as? String == "ran\n" && out["state"] as? String == "exited")
            // Restored records are listed.
            #expect(try await h.list(chat: chat).contains { $0["id"] as? String == firstID })
            // A call older than the agent's record of calls may have run: refused.
            var old = headers
            old[1] = ("Coder-Tool-Call-Message-Id", "8")
            old[3] = ("Coder-Tool-Call-Age-Ms", "\(100 * 24 * 3600 * 1000)")
            let stale = try await h.client.request("POST", "\(Self.base)/start", headers: old, json: body)
            #expect(stale.status == 409)
            #expect(jsonObject(stale.body)?["code"] as? String == "agent_started_after_tool_call")
        }
        #expect(try String(contentsOfFile: counter, encoding: .utf8) == "once\n", "the command ran once")
    }

    @Test func outputReadsBackByOffsetAfterARestart() async throws {
        let state = try makeTempDirectory()
        defer { try? FileManager.default.removeItem(atPath: state) }
        var id = ""
        try await withProcessServer(configure: { $0.stateDirectory = state }) { h in
            id = try await Self.start(h, #"{"command":"seq 1 30000"}"#)
            _ = try await h.finalOutput(id)
        }
        try await withProcessServer(configure: { $0.stateDirectory = state }) { h in
            let response = try await h.client.request("GET", "\(Self.base)/\(id)/output?offset=0&limit=4194304")
            let json = try #require(jsonObject(response.body))
            #expect(json["output"] as? String == (1...30000).map { "\($0)\n" }.joined())
            #expect(json["state"] as? String == "exited" && jsonInt(json["exit_code"]) == 0)
            // The head/tail answer is rebuilt from the spool.
            let plain = try #require(jsonObject(try await h.output(id).body))
            #expect((plain["output"] as? String)?.hasPrefix("1\n2\n3\n") == true)
            #expect((plain["output"] as? String)?.hasSuffix("29999\n30000\n") == true)
        }
    }

    /// A restored process whose spool dropped its oldest bytes shows no head (the head went
    /// with them): its output opens with the omitted marker, then the tail. Its stdin is
    /// closed, not "never asked for", and a restored terminal is not running.
    @Test func aRestoredProcessPastItsSpoolsCapHasNoHeadAndNoInput() async throws {
        let state = try makeTempDirectory()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let small: (inout ProcessManager.Configuration) -> Void = {
            $0.stateDirectory = state
            $0.spoolLimits = .init(segmentBytes: 64 << 10, maxBytesPerSpool: 256 << 10)
        }
        let total = (1...100_000).map { "\($0)\n" }.joined().utf8.count
        var id = ""
        var terminal = ""
        try await withProcessServer(configure: small) { h in
            id = try await Self.start(h, #"{"command":"seq 1 100000","stdin":true}"#)
            terminal = try await Self.start(h, #"{"command":"true","pty":{"rows":24,"cols":80}}"#)
            let live = try await h.finalOutput(id)
            #expect((live["output"] as? String)?.hasPrefix("1\n2\n3\n") == true, "live, the head is in memory")
            _ = try await h.finalOutput(terminal)
        }
        try await withProcessServer(configure: small) { h in
            let json = try await h.finalOutput(id)
            let output = try #require(json["output"] as? String)
            #expect(output.hasPrefix("... [omitted "), "\(output.prefix(80))")
            #expect(output.hasSuffix("99999\n100000\n"))
            let truncated = try #require(json["truncated"] as? [String: Any])
            #expect(jsonInt(truncated["original_bytes"]) == total)
            #expect(jsonInt(truncated["omitted_bytes"]) == total - HeadTail.defaultTailCapacity)
            let input = try await h.client.request("POST", "\(Self.base)/\(id)/stdin", body: Array("x".utf8))
            #expect(input.status == 409)
            #expect(jsonObject(input.body)?["message"] as? String == "Input of process \"\(id)\" is closed.", "\(input)")
            let resize = try await h.client.request("POST", "\(Self.base)/\(terminal)/resize", json: #"{"rows":30,"cols":100}"#)
            #expect(resize.status == 409)
            #expect(jsonObject(resize.body)?["message"] as? String == "Process \"\(terminal)\" is not running.", "\(resize)")
        }
    }
}

/// Bytes the files under `path` take on disk (allocated blocks).
func directoryBytes(_ path: String) -> Int {
    guard let walker = FileManager.default.enumerator(atPath: path) else { return 0 }
    var total = 0
    while let name = walker.nextObject() as? String {
        if let info = FileInfo.of(path: path + "/" + name), info.kind == .regular { total += info.allocatedBytes }
    }
    return total
}
