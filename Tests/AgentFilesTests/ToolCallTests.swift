import AgentCore
import AgentTestSupport
import Foundation
import Testing

@testable import AgentFiles

/// At-most-once tool calls and their cancel routes.
@Suite(.timeLimit(.minutes(3)))
struct ToolCallTests {
    static let chat = "3f2e1d0c-9b8a-4765-8432-10fedcba9876"

    static func headers(message: Int = 1, call: String, age: Int = 10) -> [(String, String)] {
        [("Coder-Chat-Id", chat), ("Coder-Tool-Call-Message-Id", "\(message)"), ("Coder-Tool-Call-Id", call), ("Coder-Tool-Call-Age-Ms", "\(age)")]
    }

    static func edit(_ path: String, _ old: String, _ new: String) -> String {
        "{\"files\":[{\"path\":\"\(path)\",\"edits\":[{\"old_text\":\"\(old)\",\"new_text\":\"\(new)\"}]}]}"
    }

    @Test func aCallRunsOnceAndRepeatsReplay() async throws {
        try await withFilesServer { h in
            let path = h.file("once.txt")
            try TestFile.write(path, "a".utf8)
            let first = try await h.post("edit-files", json: Self.edit(path, "a", "aa"), headers: Self.headers(call: "call-1"))
            #expect(first.status == 200)
            #expect(first.header("Coder-Tool-Call-Run-Age-Ms") != nil)
            let again = try await h.post("edit-files", json: Self.edit(path, "a", "aa"), headers: Self.headers(call: "call-1"))
            #expect(again.status == 200 && again.body == first.body, "the recorded answer")
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "aa", "ran once")
            #expect(h.chatPaths.paths(chat: Self.chat) == [path], "an edit with a chat lands in the path store")
            let other = try await h.post("edit-files", json: Self.edit(path, "a", "b"), headers: Self.headers(call: "call-1"))
            #expect(other.status == 409 && jsonObject(other.body)?["code"] as? String == "input_mismatch")
            // The API's usual {message, detail} beside the reference's code.
            #expect(jsonObject(other.body)?["message"] is String && (jsonObject(other.body)?["detail"] as? String)?.contains("Coder-Tool-Call-Id") == true, "\(other.bodyText)")
            let newer = try await h.post("edit-files", json: Self.edit(path, "aa", "c"), headers: Self.headers(message: 2, call: "call-9"))
            #expect(newer.status == 200)
            let stale = try await h.post("edit-files", json: Self.edit(path, "a", "aa"), headers: Self.headers(message: 1, call: "call-2"))
            #expect(stale.status == 409 && stale.bodyText.contains("stale_tool_call"))
            // Begun an hour ago: before this server started, however long the steps above took.
            let old = try await h.post("edit-files", json: Self.edit(path, "c", "d"), headers: Self.headers(message: 2, call: "call-3", age: 3_600_000))
            #expect(old.status == 409 && old.bodyText.contains("agent_started_after_tool_call"))
            #expect(try await h.post("edit-files", json: Self.edit(path, "c", "d"), headers: [("Coder-Chat-Id", Self.chat), ("Coder-Tool-Call-Id", "x")]).status == 400)
        }
    }

    @Test func eightConcurrentIdenticalCallsWriteOnce() async throws {
        try await withFilesServer { h in
            let path = h.file("race.txt")
            try TestFile.write(path, "a".utf8)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 {
                    group.addTask { try await h.post("edit-files", json: Self.edit(path, "a", "aa"), headers: Self.headers(call: "same")).status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 8))
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "aa")
        }
    }

    @Test func aRecordedErrorStillReplaysAfterTheFileIsFixed() async throws {
        try await withFilesServer { h in
            let path = h.file("fix.txt")
            try TestFile.write(path, "nothing here".utf8)
            let first = try await h.post("edit-files", json: Self.edit(path, "needle", "pin"), headers: Self.headers(call: "err"))
            #expect(first.status == 400)
            try TestFile.write(path, "needle".utf8)
            let again = try await h.post("edit-files", json: Self.edit(path, "needle", "pin"), headers: Self.headers(call: "err"))
            #expect(again.status == 400 && again.body == first.body)
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "needle")
        }
    }

    /// A call whose upload is cut off stops without an answer: it is recorded as run with
    /// its input unknown, so a repeat is answered at once (refused, never run again) instead
    /// of waiting forever for a run that ended.
    @Test func aCallWhoseUploadWasCutOffDoesNotHoldItsRepeats() async throws {
        try await withFilesServer { h in
            let path = h.file("cut.txt")
            try TestFile.write(path, "a".utf8)
            let json = Self.edit(path, "a", "b")
            // Declared larger than the collected-body limit (64 KiB), so the body streams.
            var head = "POST /api/v0/edit-files HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n"
            for (name, value) in Self.headers(call: "cut") { head += "\(name): \(value)\r\n" }
            // The client goes only once the call has reached the ledger (on a loaded host the
            // server may read the head later than any fixed delay).
            var socket = await LoopbackSocket.connect(port: h.client.port)
            #expect(socket?.send(head + "\r\n" + json) == true)
            #expect(await eventually(timeout: .seconds(30)) { h.ledger.knows(callID: "cut") })
            socket = nil
            // Bounded: a call left running would hold the repeat until this timeout.
            let repeated = try await h.client.request(
                "POST", "/api/v0/edit-files", headers: Self.headers(call: "cut"), body: Array(json.utf8), timeout: .seconds(30))
            #expect(repeated.status == 409 && repeated.bodyText.contains("input_mismatch"), "\(repeated.status) \(repeated.bodyText)")
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "a", "not run again")
        }
    }

    @Test func cancel() async throws {
        try await withFilesServer { h in
            let key = Self.headers(call: "to-cancel")
            // The cancel id: a UUIDv5 over the chat, message and call.
            let namespace: [UInt8] = [0xc5, 0x77, 0x3f, 0x4c, 0x0b, 0x3f, 0x57, 0xbc, 0x91, 0x47, 0x36, 0xda, 0xf7, 0x92, 0x1a, 0x1b]
            let chatBytes = stride(from: 0, to: 32, by: 2).map { i -> UInt8 in
                let hex = Array(Self.chat.replacingOccurrences(of: "-", with: "").utf8)
                return UInt8(String(decoding: hex[i...i + 1], as: UTF8.self), radix: 16)!
            }
            let id = uuidV5(namespace: namespace, name: chatBytes + [0, 0, 0, 0, 0, 0, 0, 1] + Array("to-cancel".utf8))
            #expect(try await h.post("write-file/\(UUID().uuidString.lowercased())/cancel", json: "", headers: key).status == 400, "a wrong id")
            let never = try await h.post("write-file/\(id)/cancel", json: "", headers: key)
            #expect(never.status == 200 && never.bodyText.trimmingCharacters(in: .whitespacesAndNewlines) == "{}")
            #expect(try await h.post("write-file/\(id)/cancel", json: "", headers: key).bodyText.trimmingCharacters(in: .whitespacesAndNewlines) == "{}")
            let later = try await h.post("write-file?path=\(FilesHarness.q(h.file("c.txt")))", body: Array("x".utf8), headers: key)
            #expect(later.status == 409 && later.bodyText.contains("tool_call_canceled"))
            #expect(!FileManager.default.fileExists(atPath: h.file("c.txt")))

            // A call that ran: its cancel returns the recorded answer.
            let ranKey = Self.headers(call: "ran")
            let ranID = uuidV5(namespace: namespace, name: chatBytes + [0, 0, 0, 0, 0, 0, 0, 1] + Array("ran".utf8))
            #expect(try await h.post("write-file?path=\(FilesHarness.q(h.file("r.txt")))", body: Array("x".utf8), headers: ranKey).status == 200)
            let outcome = try #require(jsonObject(try await h.post("write-file/\(ranID)/cancel", json: "", headers: ranKey).body))
            #expect(outcome["started"] as? Bool == true && outcome["status_code"] as? Int == 200)
        }
    }
}
