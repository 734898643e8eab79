@testable import AgentProc
import AgentTestSupport
import Foundation
import Logging
import NIOCore
import Synchronization
import Testing

/// `GET /api/v0/processes/{id}/stream` with a real WebSocket client.
@Suite(.timeLimit(.minutes(2)))
struct ProcessStreamTests {
    /// What one client received.
    final class Received: Sendable {
        struct State {
            var bytes: [UInt8] = []
            var events: [String] = []
            var order: [String] = []
            var closeCode: Int?
        }
        let state = Mutex(State())
        var bytes: [UInt8] { state.withLock { $0.bytes } }
        var text: String { String(decoding: bytes, as: UTF8.self) }
        var order: [String] { state.withLock { $0.order } }
        var events: [[String: Any]] { state.withLock { $0.events }.map { jsonObject(Array($0.utf8)) ?? [:] } }
        var omitted: Int { events.compactMap { jsonInt($0["omitted_bytes"]) }.reduce(0, +) }
        var exit: [String: Any]? { events.last { $0["type"] as? String == "exit" } }
        var messageCount: Int { state.withLock { $0.order.count } }
        var closeCode: Int? { state.withLock { $0.closeCode } }
    }

    /// Streams until the server closes; `holdAfterFirst` stops reading until it is set (a slow client),
    /// `stopAfter` closes from the client side after that many messages.
    @discardableResult
    func stream(
        _ h: Harness, _ id: String, chat: String? = nil, into received: Received = Received(),
        holdAfterFirst: TestFlag? = nil, stopAfter: Int? = nil
    ) async throws -> Received {
        let headers = chat.map { [("Coder-Chat-Id", $0)] } ?? []
        try await TestWebSocket.withConnection(port: h.port, path: "/api/v0/processes/\(id)/stream", headers: headers) { ws in
            var first = true
            while let message = try await ws.next() {
                switch message {
                case .binary(let bytes):
                    received.state.withLock {
                        $0.bytes += bytes; $0.order.append("binary")
                    }
                case .text(let text):
                    let type = jsonObject(Array(text.utf8))?["type"] as? String ?? "?"
                    received.state.withLock {
                        $0.events.append(text); $0.order.append(type)
                    }
                }
                if first, let holdAfterFirst { await holdAfterFirst.wait() }
                first = false
                if let stopAfter, received.messageCount >= stopAfter {
                    try await ws.close()
                    return
                }
            }
            received.state.withLock { $0.closeCode = ws.closeCode }
        }
        return received
    }

    @Test func liveOutputThenExitEvent() async throws {
        try await withProcessServer { h in
            let id = try await h.start("for i in 1 2 3; do echo line$i; sleep 0.05; done; exit 3")
            let r = try await stream(h, id)
            #expect(r.text == "line1\nline2\nline3\n")
            #expect(jsonInt(r.exit?["exit_code"]) == 3)
            #expect(r.order.last == "exit")
            #expect(r.closeCode == 1000)
        }
    }

    @Test func subscribingAfterExitReplaysRetainedOutput() async throws {
        try await withProcessServer { h in
            let id = try await h.start("echo done; kill -TERM $$")
            _ = try await h.finalOutput(id)
            let r = try await stream(h, id)
            #expect(r.text == "done\n")
            #expect(jsonInt(r.exit?["exit_code"]) == -1)
            #expect(r.exit?["exit_signal"] as? String == "SIGTERM")
        }
    }

    @Test func headTailGapIsAnnounced() async throws {
        try await withProcessServer { h in
            let id = try await h.start("seq 1 30000")
            let out = try await h.finalOutput(id)
            let total = jsonInt((out["truncated"] as? [String: Any])?["original_bytes"])
            let r = try await stream(h, id)
            #expect(r.order == ["binary", "omitted", "binary", "exit"])
            #expect(r.bytes.count == 32768)
            #expect(r.bytes.count + r.omitted == total)
            #expect(r.text.hasPrefix("1\n2\n"))
            #expect(r.text.hasSuffix("29999\n30000\n"))
        }
    }

    @Test func manySubscribersGetIdenticalOutput() async throws {
        let gate = try makeTempDirectory() + "/go"
        try await withProcessServer { h in
            let id = try await h.start("for i in $(seq 1 400); do [ -e \(gate) ] && break; sleep 0.05; done; seq 1 20000")
            let expected = (1...20000).map { "\($0)\n" }.joined()
            let results = (0..<5).map { _ in Received() }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for r in results { group.addTask { try await self.stream(h, id, into: r) } }
                let process = try #require(h.manager.lookup(id, chat: nil))
                #expect(await eventually { process.subscriberCount == 5 })
                try TestFile.write(gate, [UInt8]())
                try await group.waitForAll()
            }
            for r in results {
                #expect(r.text == expected)
                #expect(r.omitted == 0)
                #expect(jsonInt(r.exit?["exit_code"]) == 0)
            }
        }
    }

    /// A stalled client never slows the child: it exits while the client sleeps, the client
    /// is told how much it missed, and received + omitted accounts for every byte.
    @Test func slowSubscriberDropsInsteadOfBlocking() async throws {
        let gate = try makeTempDirectory() + "/go"
        let total = 64 << 20
        try await withProcessServer { h in
            let id = try await h.start("for i in $(seq 1 400); do [ -e \(gate) ] && break; sleep 0.05; done; head -c \(total) /dev/zero")
            let received = Received()
            let exited = TestFlag()
            async let streamed = stream(h, id, into: received, holdAfterFirst: exited)
            let process = try #require(h.manager.lookup(id, chat: nil))
            #expect(await eventually { process.subscriberCount == 1 })
            try TestFile.write(gate, [UInt8]())
            // The child finishes while the client is still asleep after its first message.
            let out = try await h.finalOutput(id)
            #expect(jsonInt(out["exit_code"]) == 0)
            #expect(received.messageCount <= 1)
            exited.set()
            _ = try await streamed
            #expect(received.omitted > 0)
            #expect(received.bytes.count + received.omitted == total)
            #expect(received.order.last == "exit")
        }
    }

    @Test func clientLeavingMidStreamUnsubscribes() async throws {
        try await withProcessServer { h in
            let id = try await h.start("while :; do echo tick; sleep 0.02; done")
            let process = try #require(h.manager.lookup(id, chat: nil))
            try await stream(h, id, stopAfter: 2)
            #expect(await eventually { process.subscriberCount == 0 })
            #expect(process.isRunning)
            _ = try await h.signal(id, #"{"signal":"kill"}"#)
        }
    }

    @Test func refusalsAreHTTPErrors() async throws {
        let chatA = "9b2d6c1e-2f4a-4b8e-9c3d-0a1b2c3d4e5f"
        let chatB = "1f2e3d4c-5b6a-4789-8a9b-0c1d2e3f4a5b"
        try await withProcessServer { h in
            let id = try await h.start("sleep 600", chat: chatA)
            // Plain GET without the upgrade headers.
            #expect(try await h.client.request("GET", "/api/v0/processes/\(id)/stream").status == 426)
            // Unknown id and foreign chat: the upgrade is refused with 404.
            await #expect(throws: (any Error).self) { try await self.stream(h, "ghost") }
            await #expect(throws: (any Error).self) { try await self.stream(h, id, chat: chatB) }
            let upgrade: [(String, String)] = [
                ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Version", "13"),
                ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ]
            // A declined upgrade says why in JSON, as the same GET without the upgrade headers.
            let ghost = try await h.client.request("GET", "/api/v0/processes/ghost/stream", headers: upgrade)
            #expect(ghost.status == 404)
            #expect(String(decoding: ghost.body, as: UTF8.self).contains(#"not found"#))
            #expect(try await h.client.request("GET", "/api/v0/processes/ghost/stream").status == 404)
            // Too many subscribers: 429 once the limit is reached.
            let holders = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<ManagedProcess.maxSubscribers { group.addTask { try await self.stream(h, id, chat: chatA) } }
                    try await group.waitForAll()
                }
            }
            let process = try #require(h.manager.lookup(id, chat: nil))
            #expect(await eventually { process.subscriberCount == ManagedProcess.maxSubscribers })
            let refused = try await h.client.request("GET", "/api/v0/processes/\(id)/stream", headers: upgrade + [("Coder-Chat-Id", chatA)])
            #expect(refused.status == 429)
            let full = try await h.client.request("GET", "/api/v0/processes/\(id)/stream", headers: [("Coder-Chat-Id", chatA)])
            #expect(full.status == 429)
            _ = try await h.signal(id, #"{"signal":"kill"}"#)
            try await holders.value
        }
    }
}
