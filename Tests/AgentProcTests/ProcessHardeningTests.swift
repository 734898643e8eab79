import AgentCore
import AgentHTTP
@testable import AgentProc
import AgentTestSupport
import Foundation
import Testing

/// Hostile and buggy clients through the real server.
@Suite struct ProcessHardeningTests {
    // MARK: Defect 7: NUL bytes

    @Test(arguments: [
        (#"{"command":"echo visible\u0000; echo hidden"}"#, "command"),
        (#"{"command":"pwd","workdir":"/tmp\u0000/etc"}"#, "workdir"),
        (#"{"command":"env","env":{"A\u0000B":"x"}}"#, "env"),
        (#"{"command":"env","env":{"A":"x\u0000y"}}"#, "env"),
    ])
    func nulBytesAreRefusedNamingTheField(body: String, field: String) async throws {
        try await withProcessServer { h in
            let response = try await h.client.request("POST", "/api/v0/processes/start", json: body)
            #expect(response.status == 400)
            let json = try #require(jsonObject(response.body))
            #expect(json["message"] as? String == "Request contains a NUL byte.")
            let validations = try #require(json["validations"] as? [[String: Any]])
            #expect(validations.first?["field"] as? String == field)
            #expect(try await h.list().isEmpty, "nothing may run")
        }
    }

    // MARK: Defect 10: duplicate keys

    @Test func duplicateKeysRunWhatGoWouldRun() async throws {
        try await withProcessServer { h in
            let response = try await h.client.request(
                "POST", "/api/v0/processes/start", json: #"{"command":"echo lower","Command":"echo upper"}"#)
            let id = try #require(jsonObject(response.body)?["id"] as? String)
            let output = try await h.finalOutput(id)
            #expect(output["output"] as? String == "upper\n")
        }
    }

    // MARK: Defect 6: stalled subscribers

    @Test func aSubscriberThatStopsReadingIsDisconnected() async throws {
        // 3 s: the subscriber must be seen while it exists, and a loaded machine can stretch
        // the poll below past a shorter window.
        try await withProcessServer(configure: { $0.subscriberStallTimeout = .seconds(3) }) { h in
            let id = try await h.start("exec cat /dev/zero")
            let process = try #require(h.manager.lookup(id, chat: nil))
            let socket = try #require(await LoopbackSocket.connect(port: h.port))
            socket.setReceiveBuffer(4096)
            socket.send(Self.handshake(id))
            // Never read: the server's writes stall, and it must drop the connection.
            #expect(await eventually(timeout: .seconds(20)) { process.subscriberCount == 1 })
            #expect(await eventually(timeout: .seconds(20)) { process.subscriberCount == 0 })
            // What the server had queued in the kernel still arrives before the close: take it fast.
            socket.setReceiveBuffer(4 << 20)
            #expect(await socket.isClosedByPeer(within: .seconds(20)))
            #expect(h.manager.subscriberBudget.usage.bytes == 0, "its queued output is freed")
            _ = try await h.signal(id, #"{"signal":"kill"}"#)
        }
    }

    @Test func aSubscriberThatIgnoresTheCloseFrameIsDropped() async throws {
        try await withProcessServer { h in
            let id = try await h.start("sleep 0.5; echo done")
            let socket = try #require(await LoopbackSocket.connect(port: h.port))
            socket.send(Self.handshake(id))
            // Read up to the server's close frame, and never answer it.
            let seen = await socket.read(until: "\u{88}\u{02}\u{03}\u{E8}", timeout: .seconds(20))
            #expect(String(decoding: seen, as: UTF8.self).contains(#""type":"exit""#))
            #expect(await socket.isClosedByPeer(within: .seconds(15)))
        }
    }

    @Test func subscribersAreBoundedInAll() async throws {
        try await withProcessServer(configure: { $0.maxSubscribers = 3 }) { h in
            let first = try await h.start("sleep 600")
            let second = try await h.start("sleep 600")
            var sockets: [LoopbackSocket] = []
            for _ in 0..<3 {
                let socket = try #require(await LoopbackSocket.connect(port: h.port))
                socket.send(Self.handshake(first))
                #expect(String.httpStatus(of: await socket.read(until: "\r\n\r\n")) == 101)
                sockets.append(socket)
            }
            // The second process has no subscriber, but the manager's bound is reached (once the
            // three have registered: a handler registers after its upgrade).
            #expect(await eventually(timeout: .seconds(20)) { h.manager.subscriberBudget.usage.subscribers == 3 })
            let refused = try await h.client.request("GET", "/api/v0/processes/\(second)/stream")
            #expect(refused.status == 429)
            #expect(refused.bodyText.contains("3 in all"))
            sockets.removeAll()
            #expect(await eventually(timeout: .seconds(10)) { h.manager.subscriberBudget.usage.subscribers == 0 })
            for id in [first, second] { _ = try await h.signal(id, #"{"signal":"kill"}"#) }
        }
    }

    // MARK: chat paths

    @Test func aChatsProcessRecordsItsWorkdirAtExit() async throws {
        let paths = ChatPaths()
        let directory = try makeTempDirectory()
        let chat = "9b2d6c1e-2f4a-4b8e-9c3d-0a1b2c3d4e5f"
        try await withProcessServer(configure: { $0.chatPaths = paths }) { h in
            let id = try await h.start("true", workdir: directory, chat: chat)
            _ = try await h.finalOutput(id, chat: chat)
            #expect(await eventually { paths.paths(chat: chat) == [directory] })
            let chatless = try await h.start("true", workdir: "/tmp")
            _ = try await h.finalOutput(chatless)
            #expect(paths.chatCount == 1, "a process without a chat records nothing")
        }
    }

    @Test func aChatsProcessRecordsItsWorkdirForItsAncestorsToo() async throws {
        let paths = ChatPaths()
        let directory = try makeTempDirectory()
        let child = "9b2d6c1e-2f4a-4b8e-9c3d-0a1b2c3d4e5f"
        let parent = "1f0e2d3c-4b5a-4697-8877-665544332211"
        let grandparent = "2a3b4c5d-6e7f-4081-9293-a4b5c6d7e8f9"
        try await withProcessServer(configure: { $0.chatPaths = paths }) { h in
            let body = try JSONSerialization.data(withJSONObject: ["command": "true", "workdir": directory])
            let headers = [("Coder-Chat-Id", child), ("Coder-Ancestor-Chat-Ids", #"["\#(parent)","\#(grandparent)"]"#)]
            let response = try await h.client.request(
                "POST", "/api/v0/processes/start", headers: headers, body: Array(body), timeout: .seconds(60))
            try #require(response.status == 200, "start: \(response)")
            let id = try #require(jsonObject(response.body)?["id"] as? String)
            _ = try await h.finalOutput(id, chat: child)
            #expect(await eventually { paths.paths(chat: grandparent) == [directory] })
            #expect(paths.paths(chat: parent) == [directory])
            #expect(paths.paths(chat: child) == [directory])
            #expect(paths.chatCount == 3)
        }
    }

    @Test func manifestProviderFallsBackUntilAManifestArrives() async throws {
        let store = ManifestStore()
        let provider = ManifestEnvironmentProvider(source: store, fallbackDirectory: "/fallback")
        #expect(await provider.defaultDirectory() == "/fallback")
        #expect(try await provider.agentEnvironment().isEmpty)
        var layer = try await provider.agentEnvironmentLayer()
        #expect(layer.generation == 0 && layer.variables.isEmpty)
        store.publish(AgentManifest(directory: "/workspace", environment: ["CODER": "true"]))
        #expect(await provider.defaultDirectory() == "/workspace")
        #expect(try await provider.agentEnvironment()["CODER"] == "true")
        layer = try await provider.agentEnvironmentLayer()
        #expect(layer.generation == 1 && layer.variables["CODER"] == "true" && layer.variables["GIT_ASKPASS"] != nil)
        store.publish(AgentManifest(directory: "", environment: ["LATER": "1"]))
        #expect(await provider.defaultDirectory() == "/fallback", "an empty manifest directory keeps the fallback")
        layer = try await provider.agentEnvironmentLayer()
        #expect(layer.generation == 2 && layer.variables["LATER"] == "1", "every publication is a new generation")
    }

    static func handshake(_ id: String) -> String { .webSocketHandshake("/api/v0/processes/\(id)/stream") }
}
