import AgentProto
import AgentRPC
import DRPC
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import SwiftProtobuf
import Synchronization
import Yamux

/// An in-process control plane speaking the real wire format: a Hummingbird WebSocket
/// endpoint at `/api/v2/workspaceagents/me/rpc`, a yamux server session per connection and
/// a dRPC server per yamux stream, recording every call.
public final class ControlPlaneDouble: Sendable {
    public struct Recorded: Sendable {
        public var upgradeAttempts = 0
        public var connections = 0
        public var manifests = 0
        public var startups: [Coder_Agent_V2_Startup] = []
        public var lifecycle: [Coder_Agent_V2_Lifecycle.State] = []
        public var appStatuses: [Coder_Agent_V2_UpdateAppStatusRequest] = []
        public var boundaryLogs: [Coder_Agent_V2_ReportBoundaryLogsRequest] = []
        public var logs: [Coder_Agent_V2_Log] = []
        public var queries: [String] = []
    }

    public let token: String
    public let version: String
    public let manifest: Coder_Agent_V2_Manifest
    public let recorded = Mutex(Recorded())
    public let logLimitExceeded = Mutex(false)
    /// Every answer waits this long first ("answer slowly"; a huge value stalls).
    public let answerDelay = Mutex<Duration>(.zero)
    private let sessions = Mutex<[YamuxSession]>([])

    public init(token: String = "8b6c4a52-9f0e-4d7b-a2c1-1e2f3a4b5c6d", version: String = "2.10", manifest: Coder_Agent_V2_Manifest = ControlPlaneDouble.defaultManifest) {
        self.token = token
        self.version = version
        self.manifest = manifest
    }

    public static var defaultManifest: Coder_Agent_V2_Manifest {
        var m = Coder_Agent_V2_Manifest()
        m.agentName = "main"
        m.workspaceName = "ws"
        m.ownerUsername = "alice"
        m.directory = "~/project"
        m.environmentVariables = ["FROM_MANIFEST": "yes"]
        return m
    }

    /// Closes every live connection (the agent sees EOF).
    public func dropConnections() async {
        let live = sessions.withLock { s -> [YamuxSession] in
            defer { s.removeAll() }
            return s
        }
        for session in live { await session.close() }
    }

    func makeDRPCServer() -> DRPCServer {
        var server = DRPCServer()
        let delay: @Sendable () async -> Void = { [self] in
            let wait = answerDelay.withLock { $0 }
            if wait > .zero { try? await Task.sleep(for: wait) }
        }
        server.register(AgentRoutes.agent("GetManifest")) { [self] _ in
            recorded.withLock { $0.manifests += 1 }
            return try manifest.serializedBytes()
        }
        server.register(AgentRoutes.agent("UpdateStartup")) { [self] bytes in
            let request = try Coder_Agent_V2_UpdateStartupRequest(serializedBytes: bytes)
            guard request.startup.version.hasPrefix("v") else { throw DRPCErrorBody(code: 0, message: "invalid version") }
            recorded.withLock { $0.startups.append(request.startup) }
            return try request.startup.serializedBytes()
        }
        server.register(AgentRoutes.agent("UpdateLifecycle")) { [self] bytes in
            await delay()
            let request = try Coder_Agent_V2_UpdateLifecycleRequest(serializedBytes: bytes)
            recorded.withLock { $0.lifecycle.append(request.lifecycle.state) }
            return try request.lifecycle.serializedBytes()
        }
        server.register(AgentRoutes.agent("UpdateAppStatus")) { [self] bytes in
            await delay()
            let request = try Coder_Agent_V2_UpdateAppStatusRequest(serializedBytes: bytes)
            recorded.withLock { $0.appStatuses.append(request) }
            return try Coder_Agent_V2_UpdateAppStatusResponse().serializedBytes()
        }
        server.register(AgentRoutes.agent("ReportBoundaryLogs")) { [self] bytes in
            let request = try Coder_Agent_V2_ReportBoundaryLogsRequest(serializedBytes: bytes)
            recorded.withLock { $0.boundaryLogs.append(request) }
            return try Coder_Agent_V2_ReportBoundaryLogsResponse().serializedBytes()
        }
        server.register(AgentRoutes.agent("BatchCreateLogs")) { [self] bytes in
            let request = try Coder_Agent_V2_BatchCreateLogsRequest(serializedBytes: bytes)
            guard request.logSourceID.count == 16 else { throw DRPCErrorBody(code: 0, message: "invalid log source id") }
            recorded.withLock { $0.logs += request.logs }
            var response = Coder_Agent_V2_BatchCreateLogsResponse()
            response.logLimitExceeded = logLimitExceeded.withLock { $0 }
            return try response.serializedBytes()
        }
        return server
    }

    /// Runs the double on an ephemeral loopback port; `body` gets the base URL.
    public func run(_ body: @escaping @Sendable (String) async throws -> Void) async throws {
        let router = Router(context: BasicWebSocketRequestContext.self)
        let wsRouter = Router(context: BasicWebSocketRequestContext.self)
        let drpc = makeDRPCServer()
        wsRouter.ws("/api/v2/workspaceagents/me/rpc") { [self] request, _ in
            recorded.withLock {
                $0.upgradeAttempts += 1
                $0.queries.append(request.uri.query ?? "")
            }
            guard request.headers[HTTPField.Name("Coder-Session-Token")!] == token,
                  request.uri.queryParameters.get("version") == version,
                  request.uri.queryParameters.get("role") == "agent"
            else { return .dontUpgrade }
            return .upgrade([:])
        } onUpgrade: { [self] inbound, outbound, _ in
            let session = YamuxSession(role: .server, transport: WSOutboundTransport(outbound: outbound))
            await session.start()
            sessions.withLock { $0.append(session) }
            recorded.withLock { $0.connections += 1 }
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    await withTaskGroup(of: Void.self) { calls in
                        while let stream = await session.accept() {
                            calls.addTask { await drpc.serve(YamuxDRPCTransport(stream: stream)) }
                        }
                    }
                }
                do {
                    for try await message in inbound.messages(maxSize: 4 << 20) {
                        if case .binary(let buffer) = message { await session.receive(Array(buffer.readableBytesView)) }
                    }
                } catch {}
                await session.transportClosed()
                await group.waitForAll()
            }
        }
        // A plain WebSocket baseline for benchmarks: echoes small messages, acknowledges
        // large ones with one byte.
        wsRouter.ws("/echo") { inbound, outbound, _ in
            for try await message in inbound.messages(maxSize: 4 << 20) {
                guard case .binary(let buffer) = message else { continue }
                try await outbound.write(.binary(buffer.readableBytes <= 64 ? buffer : ByteBuffer(bytes: [1])))
            }
        }
        let (ports, sink) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router,
            server: .http1WebSocketUpgrade(webSocketRouter: wsRouter, configuration: .init(ws: .init(maxFrameSize: 4 << 20))),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                sink.yield(channel.localAddress?.port ?? 0)
                sink.finish()
            },
            logger: Logger(label: "double", factory: { _ in SwiftLogNoOpLogHandler() }))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.run() }
            var it = ports.makeAsyncIterator()
            let port = await it.next() ?? 0
            do {
                try await body("http://127.0.0.1:\(port)")
            } catch {
                await dropConnections()
                group.cancelAll()
                throw error
            }
            await dropConnections()
            group.cancelAll()
        }
    }
}

/// The server's WebSocket writer as a yamux transport.
struct WSOutboundTransport: YamuxTransport {
    let outbound: WebSocketOutboundWriter
    func write(_ bytes: [UInt8]) async throws { try await outbound.write(.binary(ByteBuffer(bytes: bytes))) }
    func close() async { try? await outbound.close(.normalClosure, reason: nil) }
}

import HTTPTypes
import NIOWebSocket
