import AgentCore
import AgentHTTP
import AgentHost
import AgentProc
import AgentTestSupport
import Hummingbird
import Logging
import Synchronization
import Testing

/// A connection handed to ``AgentHost/connections`` as a channel (as the tailnet hands over
/// each tunnel connection) is served by every mounted route,
/// real ones included, and is closed by the agent's shutdown like the listener's.
@Suite(.timeLimit(.minutes(3)))
struct HandOverTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    /// How long a wait may take on a loaded 2-core host (a passing wait returns at once).
    static let patience: Duration = .seconds(90)
    static let peer = "[fd7a:115c:a1e0::5]:51234"

    @Test func handedOverConnectionsServeMountedRoutesAndCloseAtShutdown() async throws {
        var configuration = AgentHost.Configuration()
        configuration.handlesSignals = false
        configuration.enforcesBound = false
        let host = AgentHost(configuration: configuration, logger: Self.quiet)
        let (ports, portSink) = AsyncStream<Int>.makeStream()
        host.listen(on: BindTarget(kind: .tcp(host: "127.0.0.1", port: 0)), for: "the HTTP API", logMessage: "listening") { address in
            portSink.yield(Int(address.split(separator: ":").last!)!)
            portSink.finish()
        }
        var processes = ProcessManager.Configuration(priority: .unchanged)
        processes.shutdownGrace = .seconds(2)
        host.mount(ProcessModule(manager: try ProcessManager(configuration: processes, logger: Self.quiet)), at: "/api/v0/processes")
        host.mount(ListenerReportModule(), at: "/api/v0/origin")
        // Before the host runs, nothing serves: the connection is closed.
        let (early, earlyTheirs) = LoopbackSocket.pair()
        await #expect(throws: ConnectionHandOverError(.notServing)) {
            try await host.connections.handOver(descriptor: earlyTheirs, listener: ListenerName.tailnet, remote: nil)
        }
        #expect(await early.isClosedByPeer(within: .seconds(60)))

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await host.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            #expect(
                await eventually(timeout: Self.patience) {
                    let (probe, theirs) = LoopbackSocket.pair()
                    _ = probe
                    return (try? await host.connections.handOver(descriptor: theirs, listener: ListenerName.tailnet, remote: nil)) != nil
                })

            // The process API over a handed-over connection: start a command...
            let (startClient, startTheirs) = LoopbackSocket.descriptorPair()
            try await host.connections.handOver(descriptor: startTheirs, listener: ListenerName.tailnet, remote: Self.peer)
            let started = try await RawHTTPClient.request(
                over: startClient, "POST", "/api/v0/processes/start", headers: [("Content-Type", "application/json")],
                body: Array(#"{"command": "echo hello through the tunnel; exit 4"}"#.utf8))
            #expect(started.status == 200, "\(started)")
            let id = try #require(jsonObject(started.body)?["id"] as? String)
            // ...and stream its output on its WebSocket route, over another one.
            let (streamClient, streamTheirs) = LoopbackSocket.descriptorPair()
            try await host.connections.handOver(descriptor: streamTheirs, listener: ListenerName.tailnet, remote: Self.peer)
            let (output, exit) = try await TestWebSocket.withConnection(over: streamClient, path: "/api/v0/processes/\(id)/stream") { ws in
                var output: [UInt8] = []
                var exit: [String: Any]?
                while let message = try await ws.next() {
                    switch message {
                    case .binary(let bytes): output += bytes
                    case .text(let text):
                        if let event = jsonObject(Array(text.utf8)), event["type"] as? String == "exit" { exit = event }
                    }
                }
                return (String(decoding: output, as: UTF8.self), jsonInt(exit?["exit_code"]))
            }
            #expect(output == "hello through the tunnel\n")
            #expect(exit == 4)

            // A route tells the listener apart.
            let loopback = try await RawHTTPClient(port: port).request("GET", "/api/v0/origin")
            #expect(jsonObject(loopback.body)?["listener"] as? String == "http")
            let (originClient, originTheirs) = LoopbackSocket.descriptorPair()
            try await host.connections.handOver(descriptor: originTheirs, listener: ListenerName.tailnet, remote: Self.peer)
            let handed = try await RawHTTPClient.request(over: originClient, "GET", "/api/v0/origin")
            #expect(jsonObject(handed.body)?["listener"] as? String == "tailnet")
            #expect(jsonObject(handed.body)?["remote"] as? String == Self.peer)

            // An idle keep-alive connection, handed over, is closed by the shutdown.
            let (idle, idleTheirs) = LoopbackSocket.pair()
            try await host.connections.handOver(descriptor: idleTheirs, listener: ListenerName.tailnet, remote: Self.peer)
            #expect(idle.send("GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n"))
            #expect(String.httpStatus(of: await idle.read(until: #""ok"}"#, timeout: .seconds(60))) == 200)
            await host.shutdown()
            try await group.next()
            #expect(await idle.isClosedByPeer(within: .seconds(60)), "shutdown closed the handed-over connection")
        }
        // Once stopped, nothing more is taken.
        let (late, lateTheirs) = LoopbackSocket.pair()
        await #expect(throws: ConnectionHandOverError(.notServing)) {
            try await host.connections.handOver(descriptor: lateTheirs, listener: ListenerName.tailnet, remote: nil)
        }
        #expect(await late.isClosedByPeer(within: .seconds(60)))
    }

    @Test func aModulesParticipantsAreRegisteredWhenItIsAdded() {
        let host = AgentHost(logger: Self.quiet)
        host.add(ParticipantModule())
        #expect(host.upwardParticipants.all.map(\.name) == ["first", "second"])
    }
}

/// Reports the listener and peer of each request.
struct ListenerReportModule: HTTPModule {
    var name: String { "origin" }

    func routes(_ routes: inout AgentRoutes) {
        routes.get { _, context in JSONResponse.make(["listener": context.listener, "remote": context.remote ?? ""]) }
    }
}

/// A module with two upward participants that do nothing.
struct ParticipantModule: AgentModule {
    struct Idle: UpwardParticipant {
        let name: String
        func run(on session: any UpwardSession) async throws {}
    }

    var name: String { "participants" }
    var upwardParticipants: [any UpwardParticipant] { [Idle(name: "first"), Idle(name: "second")] }
}
