import AgentCore
import AgentHTTP
import AgentTestSupport
import Foundation
import Hummingbird
import Logging
import NIOCore
import Synchronization
import Testing

/// Connections the server did not accept, served as channels through
/// `AgentHTTPServing.serve(_:listener:remote:)` (here: NIO channels over one end of a unix
/// socket pair the test holds the other end of; the tailnet's tunnel channels take the same
/// entry point) by the same routes,
/// guards and registry as the listener's, with the listener's name in every request's
/// context.
@Suite(.timeLimit(.minutes(3)))
struct HandedOverConnectionTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    /// How long a wait may take on a loaded 2-core host (a passing wait returns at once).
    static let patience: Duration = .seconds(90)
    static let peer = "[fd7a:115c:a1e0::1]:4242"

    @Test func plainRequestsOverAHandedOverSocketWithNoListener() async throws {
        try await withHandedOver { handedOver, serving, _ in
            let (client, theirs) = LoopbackSocket.pair()
            try await handedOver.serve(descriptor: theirs, listener: ListenerName.tailnet, remote: Self.peer)
            // Keep-alive: two requests on the one connection.
            #expect(client.send("GET /t/where HTTP/1.1\r\nHost: agent\r\n\r\n"))
            let first = await client.read(until: "}", timeout: .seconds(60))
            #expect(String.httpStatus(of: first) == 200, "\(String(decoding: first, as: UTF8.self))")
            let body = try #require(jsonObject(Array(first[(first.firstRange(of: Array("\r\n\r\n".utf8))!.upperBound)...])))
            #expect(body["listener"] as? String == "tailnet")
            #expect(body["remote"] as? String == Self.peer)
            #expect(serving.connections.count == 1, "counted in the listener's registry")
            #expect(handedOver.openCount == 1)
            #expect(client.send("GET /healthz HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n\r\n"))
            let second = await client.read(until: #"{"status":"ok"}"#, timeout: .seconds(60))
            #expect(String.httpStatus(of: second) == 200)
            // The server shuts its side first, then closes at our FIN.
            client.shutdownWrite()
            let (_, closed) = await client.readAll(timeout: .seconds(60))
            #expect(closed, "Connection: close ends a handed-over connection as any other")
            #expect(await eventually(timeout: Self.patience) { serving.connections.count == 0 && handedOver.openCount == 0 })
        }
    }

    @Test func streamingResponse() async throws {
        try await withHandedOver { handedOver, _, _ in
            let (ours, theirs) = LoopbackSocket.descriptorPair()
            try await handedOver.serve(descriptor: theirs, listener: ListenerName.tailnet, remote: Self.peer)
            let response = try await RawHTTPClient.request(over: ours, "GET", "/t/stream")
            #expect(response.status == 200)
            #expect(response.header("Transfer-Encoding") == "chunked")
            #expect(response.body.count == OriginRoutes.streamParts * OriginRoutes.streamPartSize)
            // Each part is its own letter, in order.
            let letters = stride(from: 0, to: response.body.count, by: OriginRoutes.streamPartSize).map { response.body[$0] }
            #expect(letters == (0..<OriginRoutes.streamParts).map { UInt8(ascii: "a") + UInt8($0) })
        }
    }

    @Test func webSocketUpgradeOnAMountedRoute() async throws {
        try await withHandedOver { handedOver, serving, _ in
            let (ours, theirs) = LoopbackSocket.descriptorPair()
            try await handedOver.serve(descriptor: theirs, listener: ListenerName.tailnet, remote: Self.peer)
            let replies = try await TestWebSocket.withConnection(over: ours, path: "/t/socket") { ws -> [TestWebSocket.Message] in
                var replies: [TestWebSocket.Message] = []
                if let hello = try await ws.next() { replies.append(hello) }
                #expect(serving.connections.webSocketCounters.open == 1, "holds a WebSocket slot of the same budget")
                try await ws.send(opcode: 0x1, payload: Array("ping".utf8))
                if let echo = try await ws.next() { replies.append(echo) }
                try await ws.close()
                return replies
            }
            #expect(replies == [.text("hello from tailnet [fd7a:115c:a1e0::1]:4242"), .text("echo ping")])
            #expect(await eventually(timeout: Self.patience) { serving.connections.webSocketCounters.open == 0 && handedOver.openCount == 0 })
        }
    }

    @Test func aClientThatVanishesIsNoticedAndForgotten() async throws {
        try await withHandedOver { handedOver, serving, routes in
            let (client, theirs) = LoopbackSocket.pair()
            try await handedOver.serve(descriptor: theirs, listener: ListenerName.tailnet, remote: nil)
            #expect(client.send("GET /t/wait HTTP/1.1\r\nHost: agent\r\n\r\n"))
            #expect(await eventually(timeout: Self.patience) { routes.waiting.isSet }, "the request is being served")
            #expect(serving.connections.busyCount == 1)
            _ = consume client  // closes our end: the client is gone mid-request
            #expect(await eventually(timeout: Self.patience) { routes.sawClientGo.isSet }, "the waiting route saw its client go")
            #expect(await eventually(timeout: Self.patience) { serving.connections.count == 0 && handedOver.openCount == 0 })
        }
    }

    /// A route reports `context.listener`, so loopback and handed-over requests can be told apart.
    @Test func theListenerTellsLoopbackFromHandedOver() async throws {
        try await withListenerAndHandedOver { handedOver, port in
            let loopback = try await RawHTTPClient(port: port).request("GET", "/t/where")
            let local = try #require(jsonObject(loopback.body))
            #expect(local["listener"] as? String == "http")
            #expect((local["remote"] as? String)?.hasPrefix("127.0.0.1:") == true, "\(local)")

            let (ours, theirs) = LoopbackSocket.descriptorPair()
            try await handedOver.serve(descriptor: theirs, listener: ListenerName.tailnet, remote: Self.peer)
            let handed = try await RawHTTPClient.request(over: ours, "GET", "/t/where")
            let remote = try #require(jsonObject(handed.body))
            #expect(remote["listener"] as? String == "tailnet")
            #expect(remote["remote"] as? String == Self.peer)
        }
    }

    /// The request guard's head deadline holds for handed-over connections too.
    @Test func theHeadDeadlineAppliesToHandedOverConnections() async throws {
        // 15 s: the half head must arrive before the idle connection's own deadline, which a
        // loaded host could otherwise miss (the connection is then closed quietly, no 408);
        // the first minute of a full run has stalled test tasks for more than 5 s.
        try await withHandedOver(headTimeout: .seconds(15)) { handedOver, _, _ in
            let (client, theirs) = LoopbackSocket.pair()
            try await handedOver.serve(descriptor: theirs, listener: ListenerName.tailnet, remote: nil)
            // One exchange first: the connection is being read when the half head follows
            // (the deadline then runs from the end of that exchange).
            #expect(client.send("GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n"))
            #expect(String.httpStatus(of: await client.read(until: #""ok"}"#, timeout: .seconds(60))) == 200)
            #expect(client.send("GET /hea"))
            let (bytes, closed) = await client.readAll(timeout: .seconds(60))
            #expect(closed, "a half-sent head is cut at the deadline")
            #expect(String.httpStatus(of: bytes) == 408, "\(String(decoding: bytes, as: UTF8.self))")
        }
    }

    @Test func aBadListenerNameIsRefusedAndTheConnectionClosed() async throws {
        let handedOver = HandOverTarget(serving: AgentHTTPServing(mounts: [], logger: Self.quiet))
        // (Whether the connection was closed is seen from the other end: checking the
        // descriptor's number races with tests that open files meanwhile.)
        let (badNamePeer, badName) = LoopbackSocket.pair()
        await #expect(throws: ConnectionHandOverError(.invalidListenerName)) {
            try await handedOver.serve(descriptor: badName, listener: "tail net\n", remote: nil)
        }
        #expect(await badNamePeer.isClosedByPeer(within: .seconds(60)))
    }

    /// The registry's last resort (the shutdown bound) closes channel-served connections too.
    @Test func closeAllClosesHandedOverConnections() async throws {
        try await withHandedOver { handedOver, serving, _ in
            let (client, theirs) = LoopbackSocket.pair()
            try await handedOver.serve(descriptor: theirs, listener: ListenerName.tailnet, remote: nil)
            #expect(client.send("GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n"))
            #expect(String.httpStatus(of: await client.read(until: "ok", timeout: .seconds(60))) == 200)
            #expect(handedOver.openCount == 1)
            serving.connections.closeAll()
            #expect(await client.isClosedByPeer(within: .seconds(60)))
            #expect(await eventually(timeout: Self.patience) { handedOver.openCount == 0 })
        }
    }

    // MARK: Harness

    /// Serves handed-over connections (and no listener) with ``OriginRoutes`` at `/t`.
    func withHandedOver(
        headTimeout: Duration = AgentHTTPLimits.requestHeadTimeout,
        _ body: (HandOverTarget, AgentHTTPServing, OriginRoutes) async throws -> Void
    ) async throws {
        try await withServing(listening: false, headTimeout: headTimeout) { handedOver, serving, routes, _ in
            try await body(handedOver, serving, routes)
        }
    }

    /// The same, beside a loopback listener of the same serving; `body` gets its port.
    func withListenerAndHandedOver(_ body: (HandOverTarget, Int) async throws -> Void) async throws {
        try await withServing(listening: true, headTimeout: AgentHTTPLimits.requestHeadTimeout) { handedOver, _, _, port in
            try await body(handedOver, try #require(port))
        }
    }

    private func withServing(
        listening: Bool, headTimeout: Duration,
        _ body: (HandOverTarget, AgentHTTPServing, OriginRoutes, Int?) async throws -> Void
    ) async throws {
        let routes = OriginRoutes()
        let serving = AgentHTTPServing(mounts: [HTTPMount(routes, at: "/t")], headTimeout: headTimeout, logger: Self.quiet)
        let handedOver = HandOverTarget(serving: serving)
        let (ports, portSink) = AsyncStream<Int>.makeStream()
        try await withThrowingTaskGroup(of: Void.self) { group in
            var port: Int?
            if listening {
                let app = serving.application(address: BindTarget(kind: .tcp(host: "127.0.0.1", port: 0))) { channel in
                    portSink.yield(channel.localAddress?.port ?? 0)
                    portSink.finish()
                }
                group.addTask { try await app.run() }
                var iterator = ports.makeAsyncIterator()
                let bound = try #require(await iterator.next())
                port = bound
            }
            // A probe is served (and then closed).
            #expect(
                await eventually(timeout: Self.patience) {
                    let (probe, theirs) = LoopbackSocket.pair()
                    guard (try? await handedOver.serve(descriptor: theirs, listener: ListenerName.tailnet, remote: nil)) != nil else { return false }
                    probe.send("GET /healthz HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n\r\n")
                    probe.shutdownWrite()
                    return String.httpStatus(of: await probe.readAll(timeout: .seconds(60)).bytes) == 200
                })
            #expect(await eventually(timeout: Self.patience) { handedOver.openCount == 0 && serving.connections.count == 0 })
            do {
                try await body(handedOver, serving, routes, port)
            } catch {
                serving.connections.closeAll()
                group.cancelAll()
                throw error
            }
            serving.connections.closeAll()
            group.cancelAll()
        }
    }
}

/// Socketpair ends served as NIO channels through the serving's channel entry point.
struct HandOverTarget {
    let serving: AgentHTTPServing

    func serve(descriptor: CInt, listener: String, remote: String?) async throws {
        try await serving.handOver(descriptor: descriptor, listener: listener, remote: remote)
    }

    /// Connections open in the serving's registry.
    var openCount: Int { serving.connections.count }
}

/// Routes that report where their request came from, stream a body, wait for their client
/// to go, and greet on a WebSocket with the listener's name.
struct OriginRoutes: HTTPModule {
    static let streamParts = 6
    static let streamPartSize = 64 * 1024

    /// Set while `/wait` waits; then once it saw its client go.
    let waiting = TestFlag()
    let sawClientGo = TestFlag()

    var name: String { "origin" }

    func routes(_ routes: inout AgentRoutes) {
        routes.get("where") { _, context in
            JSONResponse.make(["listener": context.listener, "remote": context.remote ?? ""])
        }
        routes.get("stream") { _, _ in
            Response(
                status: .ok,
                body: ResponseBody { writer in
                    for part in 0..<Self.streamParts {
                        try await writer.write(ByteBuffer(repeating: UInt8(ascii: "a") + UInt8(part), count: Self.streamPartSize))
                    }
                    try await writer.finish(nil)
                })
        }
        routes.get("wait") { [waiting, sawClientGo] _, context in
            let gone = OneShotSignal()
            let registration = context.clientGone.whenGone { gone.fire() }
            waiting.set()
            await gone.wait()
            registration.cancel()
            sawClientGo.set()
            return Response(status: .ok)
        }
        routes.webSocket("socket") { _ throws(APIError) in
        } handler: { inbound, outbound, context in
            let origin = context.requestContext
            try await outbound.write(.text("hello from \(origin.listener) \(origin.remote ?? "?")"))
            for try await message in inbound.messages(maxSize: 1 << 16) {
                if case .text(let text) = message { try await outbound.write(.text("echo \(text)")) }
            }
        }
    }
}
