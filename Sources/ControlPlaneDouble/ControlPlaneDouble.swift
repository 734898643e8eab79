import AgentProto
import AgentRPC
import DRPC
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import SwiftProtobuf
import Synchronization
import Yamux

/// An in-process control plane speaking the real wire format: a SwiftNIO HTTP server whose
/// `/api/v2/workspaceagents/me/rpc` upgrades to a WebSocket after checking the token,
/// version and role as coderd does (401 / 400 with coderd's JSON bodies otherwise), a yamux
/// server session per connection and a dRPC server per yamux stream, recording every call.
///
/// It can be told to refuse upgrades (``refuseWith``), drop every connection
/// (``dropConnections()``), answer slowly or stall (``answerDelay``), and report the log
/// limit (``logLimitExceeded``). Announcement banners are configurable (``bannerState``).
/// Context-state pushes are validated as coderd does and kept in ``contextState``. A test
/// can serve methods of its own beside the Agent API (``handle(_:unary:)``,
/// ``handleServerStream(_:_:)``, ``handleStream(_:_:)``: a test service for upward
/// participants). It also serves `/echo`, a plain WebSocket echo used as the
/// benchmarks' baseline on the same server.
public final class ControlPlaneDouble: Sendable {
    public struct Recorded: Sendable {
        public var upgradeAttempts = 0
        public var refusals: [Int] = []
        public var connections = 0
        public var manifests = 0
        /// When each GetManifest and UpdateStartup arrived (the manifest benchmark).
        public var manifestTimes: [ContinuousClock.Instant] = []
        public var startupTimes: [ContinuousClock.Instant] = []
        public var startups: [Coder_Agent_V2_Startup] = []
        public var lifecycle: [Coder_Agent_V2_Lifecycle.State] = []
        public var appStatuses: [Coder_Agent_V2_UpdateAppStatusRequest] = []
        public var boundaryLogs: [Coder_Agent_V2_ReportBoundaryLogsRequest] = []
        public var connectionReports: [Coder_Agent_V2_Connection] = []
        public var logs: [Coder_Agent_V2_Log] = []
        /// Log lines received (kept or not: see ``keepsPayloads``).
        public var logLineCount = 0
        /// Every BatchCreateLogs request in arrival order (source and lines).
        public var logBatches: [Coder_Agent_V2_BatchCreateLogsRequest] = []
        public var scriptTimings: [Coder_Agent_V2_Timing] = []
        public var metadataBatches: [Coder_Agent_V2_BatchUpdateMetadataRequest] = []
        public var metadataTimes: [ContinuousClock.Instant] = []
        public var appHealthBatches: [Coder_Agent_V2_BatchUpdateAppHealthRequest] = []
        public var statsRequests: [Coder_Agent_V2_UpdateStatsRequest] = []
        public var statsTimes: [ContinuousClock.Instant] = []
        public var queries: [String] = []
        /// Each upgrade request's headers, in arrival order (the token and extra headers).
        public var upgradeHeaders: [[(name: String, value: String)]] = []
    }

    public static let rpcPath = "/api/v2/workspaceagents/me/rpc"

    public let token: String
    /// The Agent API version served, as coderd: any minor up to it, a newer one refused with
    /// 400 `Unknown or unsupported API version` ("2.10": a control plane before `session_counts`).
    public let version: String
    /// What GetManifest answers; ``setManifest(_:)`` changes it for the next fetch (a
    /// secret changed in coderd reaches the agent at its next connection).
    public var manifest: Coder_Agent_V2_Manifest { served.withLock { $0.manifest } }
    /// Encoded once per change, so that timing GetManifest measures the agent, not the double.
    private let served: Mutex<(manifest: Coder_Agent_V2_Manifest, bytes: [UInt8])>
    public let recorded = Mutex(Recorded())
    public let logLimitExceeded = Mutex(false)
    /// What UpdateStats answers as `report_interval` (coderd's default 30 s).
    public let statsReportInterval = Mutex<Duration>(.seconds(30))
    /// Every answer waits this long first ("answer slowly"; a huge value stalls).
    public let answerDelay = Mutex<Duration>(.zero)
    /// GetManifest's answers wait this long first (read when each request arrives; a huge
    /// value stalls the manifest only).
    public let manifestDelay = Mutex<Duration>(.zero)
    /// How long an accepted RPC connection waits, after its 101 is written, before its
    /// session is made (a busy host's event loop between the two).
    public let sessionSetupDelay = Mutex<TimeAmount>(.zero)
    /// The next this many UpdateLifecycle calls are answered with an error (a database
    /// that is down for a moment); the state is not recorded.
    public let failingLifecycleCalls = Mutex(0)
    /// The next this many BatchCreateLogs calls are answered with an error; nothing is kept.
    public let failingLogBatches = Mutex(0)
    /// UpdateLifecycle calls that arrived (answered or not yet: before ``answerDelay``).
    public let lifecycleCallsArrived = Mutex(0)
    /// When set, every upgrade is refused with this HTTP status ("reject").
    public let refuseWith = Mutex<Int?>(nil)
    /// Tokens accepted beside ``token`` (those an instance-identity exchange hands out).
    public let acceptedTokens = Mutex<Set<String>>([])
    private let sessions = Mutex<[YamuxSession]>([])
    /// Connections whose RPC upgrade was accepted, from before the 101 is sent until their
    /// session is in ``sessions``: the agent may hold a session whose side here is not made
    /// yet (its pipeline is made after the 101 is written).
    private let rpcConnections = Mutex<[ObjectIdentifier: any Channel]>([:])
    /// Every accepted connection while the double runs, and whether it has stopped: when
    /// `run`'s body returns, all are closed, including one still upgrading (a control plane
    /// "killed" must not keep serving a connection that was half made).
    private let accepted = Mutex<(channels: [ObjectIdentifier: any Channel], stopped: Bool)>(([:], false))
    /// PushContextState: what was pushed and stored (see ``ContextState``).
    public let contextState = Mutex(ContextState())
    /// GetAnnouncementBanners: what it answers and how often it was called (``BannerState``).
    public let bannerState = Mutex(BannerState())
    /// Methods a test added (``handle(_:unary:)`` and the stream variants).
    private let extraMethods = Mutex<[(String, ExtraMethod)]>([])
    /// Plain HTTP routes a test added (``handleHTTP(_:_:_:)``) and what they received.
    let httpRoutes = Mutex<[(method: String, path: String, handler: HTTPRouteHandler)]>([])
    let receivedHTTP = Mutex<[DoubleHTTPRequest]>([])
    /// The owner's external-auth providers, links and git key (coderd's REST routes).
    public let externalAuth = Mutex(DoubleExternalAuth())
    /// The access URL coderd puts in the links it answers with (`<access URL>/external-auth/<id>`).
    public let accessURL = "https://coder.example.com"

    private enum ExtraMethod {
        case unary(DRPCServer.UnaryHandler)
        case stream(DRPCServer.StreamHandler)
    }

    /// False (benchmarks): boundary-log batches are acknowledged without being decoded or
    /// kept, and log lines decoded but only counted.
    public let keepsPayloads: Bool

    public init(
        token: String = "8b6c4a52-9f0e-4d7b-a2c1-1e2f3a4b5c6d", version: String = "2.11",
        manifest: Coder_Agent_V2_Manifest = ControlPlaneDouble.defaultManifest, keepsPayloads: Bool = true
    ) {
        self.keepsPayloads = keepsPayloads
        self.token = token
        self.version = version
        self.served = Mutex((manifest, (try? manifest.serializedBytes()) ?? []))
        registerCoderdRoutes()
    }

    /// A user secret as coderd puts it in the manifest (field 19).
    public static func secret(env: String = "", file: String = "", _ value: [UInt8]) -> Coder_Agent_V2_WorkspaceSecret {
        var secret = Coder_Agent_V2_WorkspaceSecret()
        secret.envName = env
        secret.filePath = file
        secret.value = Data(value)
        return secret
    }

    /// Answers GetManifest with `manifest` from now on.
    public func setManifest(_ manifest: Coder_Agent_V2_Manifest) {
        let bytes = (try? manifest.serializedBytes()) ?? []
        served.withLock { $0 = (manifest, bytes) }
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

    /// Closes every live RPC connection (the agent sees EOF), including one whose upgrade
    /// was answered but whose session is not made yet.
    public func dropConnections() async {
        // Connections first: one whose session is made meanwhile is in one list or both.
        let unmade = rpcConnections.withLock { c -> [any Channel] in
            defer { c.removeAll() }
            return Array(c.values)
        }
        let live = sessions.withLock { s -> [YamuxSession] in
            defer { s.removeAll() }
            return s
        }
        for session in live { await session.close() }
        for connection in unmade { try? await connection.close() }
    }

    // MARK: A test's own methods

    /// Serves a unary method of the test's own (`/test.v1.Test/Echo`) on connections made
    /// from now on: the request's bytes in, the response's out; a thrown `DRPCErrorBody`
    /// is sent as the call's Error.
    public func handle(_ method: String, unary handler: @escaping DRPCServer.UnaryHandler) {
        extraMethods.withLock { $0.append((method, .unary(handler))) }
    }

    /// Serves a server-streaming method on connections made from now on: `handler` gets
    /// the one request and sends what it likes; returning ends the stream (CloseSend).
    public func handleServerStream(
        _ method: String, _ handler: @escaping @Sendable (_ request: [UInt8], _ call: DRPCServerCall) async throws -> Void
    ) {
        handleStream(method) { call in
            guard let request = try await call.receive() else { throw DRPCErrorBody(code: 0, message: "EOF") }
            try await handler(request, call)
        }
    }

    /// Serves a bidirectional (or client-streaming) method on connections made from now on:
    /// `handler` receives and sends on the call until it returns (CloseSend) or throws (Error).
    public func handleStream(_ method: String, _ handler: @escaping DRPCServer.StreamHandler) {
        extraMethods.withLock { $0.append((method, .stream(handler))) }
    }

    // MARK: RPCs

    /// The Agent API and the test's own methods, for one connection.
    func makeDRPCServer() -> DRPCServer {
        var server = DRPCServer()
        for (method, handler) in extraMethods.withLock({ $0 }) {
            switch handler {
            case .unary(let handler): server.register(method, handler)
            case .stream(let handler): server.registerStream(method, handler)
            }
        }
        // No capture lists below: Swift 6.3 drops the `nonisolated(nonsending)` of a
        // closure literal that has one, and the handler would hop off the loop.
        // Runs on the caller's executor (the session's loop): no hop when there is no delay.
        let delay: nonisolated(nonsending) @Sendable () async -> Void = {
            let wait = self.answerDelay.withLock { $0 }
            if wait > .zero { try? await Task.sleep(for: wait) }
        }
        server.register(DRPCMethodPath.agent("GetManifest")) { _ in
            self.recorded.withLock {
                $0.manifests += 1
                $0.manifestTimes.append(.now)
            }
            let wait = self.manifestDelay.withLock { $0 }
            if wait > .zero { try? await Task.sleep(for: wait) }
            return self.served.withLock { $0.bytes }
        }
        server.register(DRPCMethodPath.agent("UpdateStartup")) { bytes in
            let request = try Coder_Agent_V2_UpdateStartupRequest(serializedBytes: bytes)
            guard request.startup.version.hasPrefix("v") else { throw DRPCErrorBody(code: 0, message: "invalid version") }
            self.recorded.withLock {
                $0.startups.append(request.startup)
                $0.startupTimes.append(.now)
            }
            return try request.startup.serializedBytes()
        }
        server.register(DRPCMethodPath.agent("UpdateLifecycle")) { bytes in
            self.lifecycleCallsArrived.withLock { $0 += 1 }
            await delay()
            let fail = self.failingLifecycleCalls.withLock { count -> Bool in
                defer { count = max(0, count - 1) }
                return count > 0
            }
            if fail { throw DRPCErrorBody(code: 0, message: "update workspace agent lifecycle state: database is down") }
            let request = try Coder_Agent_V2_UpdateLifecycleRequest(serializedBytes: bytes)
            self.recorded.withLock { $0.lifecycle.append(request.lifecycle.state) }
            return try request.lifecycle.serializedBytes()
        }
        server.register(DRPCMethodPath.agent("UpdateAppStatus")) { bytes in
            await delay()
            let request = try Coder_Agent_V2_UpdateAppStatusRequest(serializedBytes: bytes)
            // coderd refuses messages over 160 bytes.
            guard request.message.utf8.count <= 160 else {
                throw DRPCErrorBody(code: 0, message: "message is too long (\(request.message.utf8.count) > 160 bytes)")
            }
            // coderd looks the app up by slug; this one never exists.
            guard request.slug != Self.unknownAppSlug else {
                throw DRPCErrorBody(code: 0, message: "Failed to get workspace app: app not found")
            }
            self.recorded.withLock { $0.appStatuses.append(request) }
            return try Coder_Agent_V2_UpdateAppStatusResponse().serializedBytes()
        }
        server.register(DRPCMethodPath.agent("ReportBoundaryLogs")) { bytes in
            // In benchmarks the batch is acknowledged unread, as the echo baseline does.
            let kept =
                self.keepsPayloads
                ? try Coder_Agent_V2_ReportBoundaryLogsRequest(serializedBytes: bytes)
                : Coder_Agent_V2_ReportBoundaryLogsRequest()
            self.recorded.withLock { $0.boundaryLogs.append(kept) }
            return try Coder_Agent_V2_ReportBoundaryLogsResponse().serializedBytes()
        }
        server.register(DRPCMethodPath.agent("ReportConnection")) { bytes in
            let request = try Coder_Agent_V2_ReportConnectionRequest(serializedBytes: bytes)
            self.recorded.withLock { $0.connectionReports.append(request.connection) }
            return try Google_Protobuf_Empty().serializedBytes()
        }
        server.register(DRPCMethodPath.agent("BatchCreateLogs")) { bytes in
            let fail = self.failingLogBatches.withLock { count -> Bool in
                defer { count = max(0, count - 1) }
                return count > 0
            }
            if fail { throw DRPCErrorBody(code: 0, message: "insert workspace agent logs: database is down") }
            if !self.keepsPayloads, let lines = Self.countLogs(bytes) {
                // Benchmarks: the lines are counted from the wire, not decoded.
                self.recorded.withLock { $0.logLineCount += lines }
                var response = Coder_Agent_V2_BatchCreateLogsResponse()
                response.logLimitExceeded = self.logLimitExceeded.withLock { $0 }
                return try response.serializedBytes()
            }
            let request = try Coder_Agent_V2_BatchCreateLogsRequest(serializedBytes: bytes)
            guard request.logSourceID.count == 16 else { throw DRPCErrorBody(code: 0, message: "invalid log source id") }
            let keep = self.keepsPayloads
            self.recorded.withLock {
                $0.logLineCount += request.logs.count
                guard keep else { return }
                $0.logs += request.logs
                $0.logBatches.append(request)
            }
            var response = Coder_Agent_V2_BatchCreateLogsResponse()
            response.logLimitExceeded = self.logLimitExceeded.withLock { $0 }
            return try response.serializedBytes()
        }
        server.register(DRPCMethodPath.agent("ScriptCompleted")) { bytes in
            await delay()
            let request = try Coder_Agent_V2_WorkspaceAgentScriptCompletedRequest(serializedBytes: bytes)
            // coderd's checks (coderd/agentapi/scripts.go), texts exact.
            guard request.hasTiming else { throw DRPCErrorBody(code: 0, message: "script timing is required") }
            let timing = request.timing
            guard timing.scriptID.count == 16 else {
                throw DRPCErrorBody(code: 0, message: "script id from bytes: invalid UUID (got \(timing.scriptID.count) bytes)")
            }
            guard timing.hasStart, timing.start.seconds != 0 || timing.start.nanos != 0 else {
                throw DRPCErrorBody(code: 0, message: "script start time is required and cannot be zero")
            }
            guard timing.hasEnd, timing.end.seconds != 0 || timing.end.nanos != 0 else {
                throw DRPCErrorBody(code: 0, message: "script end time is required and cannot be zero")
            }
            guard (timing.start.seconds, timing.start.nanos) <= (timing.end.seconds, timing.end.nanos) else {
                throw DRPCErrorBody(code: 0, message: "script start time cannot be after end time")
            }
            self.recorded.withLock { $0.scriptTimings.append(timing) }
            return try Coder_Agent_V2_WorkspaceAgentScriptCompletedResponse().serializedBytes()
        }
        server.register(DRPCMethodPath.agent("BatchUpdateMetadata")) { bytes in
            let request = try Coder_Agent_V2_BatchUpdateMetadataRequest(serializedBytes: bytes)
            // coderd sums the keys' lengths over the request (6144 bytes at most).
            let keyBytes = request.metadata.reduce(0) { $0 + $1.key.utf8.count }
            guard keyBytes <= 6144 else {
                throw DRPCErrorBody(code: 0, message: "metadata keys of \(keyBytes) bytes exceeded 6144 bytes")
            }
            self.recorded.withLock {
                $0.metadataBatches.append(request)
                $0.metadataTimes.append(.now)
            }
            return try Coder_Agent_V2_BatchUpdateMetadataResponse().serializedBytes()
        }
        server.register(DRPCMethodPath.agent("BatchUpdateAppHealths")) { bytes in
            let request = try Coder_Agent_V2_BatchUpdateAppHealthRequest(serializedBytes: bytes)
            let known = Set(self.manifest.apps.map(\.id))
            for update in request.updates where !known.contains(update.id) {
                throw DRPCErrorBody(code: 0, message: "workspace app ID \"\(Self.uuidText(update.id))\" not found")
            }
            self.recorded.withLock { $0.appHealthBatches.append(request) }
            return try Coder_Agent_V2_BatchUpdateAppHealthResponse().serializedBytes()
        }
        server.register(DRPCMethodPath.agent("UpdateStats")) { bytes in
            let request = try Coder_Agent_V2_UpdateStatsRequest(serializedBytes: bytes)
            self.recorded.withLock {
                $0.statsRequests.append(request)
                $0.statsTimes.append(.now)
            }
            var response = Coder_Agent_V2_UpdateStatsResponse()
            let interval = self.statsReportInterval.withLock { $0 }
            let (seconds, attoseconds) = interval.components
            response.reportInterval = Google_Protobuf_Duration(seconds: seconds, nanos: Int32(attoseconds / 1_000_000_000))
            return try response.serializedBytes()
        }
        registerContextState(on: &server)
        registerBanners(on: &server)
        return server
    }

    // MARK: Upgrade checks

    /// What coderd answers before upgrading: nil to upgrade, else (status, JSON body).
    /// Authentication comes first (a middleware), then the version.
    func refusal(for head: HTTPRequestHead) -> (Int, String)? {
        if let status = refuseWith.withLock({ $0 }) {
            return (status, #"{"message":"Internal error.","detail":"told to refuse"}"#)
        }
        let components = URLComponents(string: head.uri)
        let query = components?.queryItems ?? []
        guard let presented = head.headers.first(name: "Coder-Session-Token"), !presented.isEmpty else {
            return (401, #"{"message":"Cookie \"coder_session_token\" must be provided."}"#)
        }
        guard UUID(uuidString: presented) != nil else {
            return (401, #"{"message":"Workspace agent token invalid.","detail":"An agent token must be a valid UUIDv4."}"#)
        }
        guard presented == token || acceptedTokens.withLock({ $0.contains(presented) }) else {
            return (401, #"{"message":"Workspace agent not authorized.","detail":"The agent cannot authenticate until the workspace provision job has been completed."}"#)
        }
        let requested = query.first { $0.name == "version" }?.value ?? "2.0"
        if let detail = Self.versionError(requested, server: version) {
            return (400, #"{"message":"Unknown or unsupported API version","validations":[{"field":"version","detail":"\#(detail)"}]}"#)
        }
        return nil
    }

    /// coderd's `apiversion.Validate` for a server at `server` (no older majors kept): nil
    /// when it serves `requested` (its major, any minor up to its own), else its error text.
    public static func versionError(_ requested: String, server: String) -> String? {
        func parse(_ text: String) -> (Int, Int)? {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 2, let major = Int(parts[0]), let minor = Int(parts[1]) else { return nil }
            return (major, minor)
        }
        let parts = requested.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return "invalid version string: \(requested)" }
        guard Int(parts[0]) != nil else { return "invalid major version: \(requested)" }
        guard let (major, minor) = parse(requested) else { return "invalid minor version: \(requested)" }
        guard let (serverMajor, serverMinor) = parse(server) else { return "server version \(server) is not major.minor" }
        if major > serverMajor { return "server is at version \(server), behind requested major version \(requested)" }
        if major == serverMajor {
            return minor > serverMinor ? "server is at version \(server), behind requested minor version \(requested)" : nil
        }
        return "version \(requested) is no longer supported"
    }

    // MARK: Server

    /// Runs the double on a loopback port (0: an ephemeral one) until `body`, which gets
    /// the base URL, returns; then the listener and every connection are closed (the
    /// control plane "killed").
    /// An app slug the double answers as coderd answers an unknown app.
    public static let unknownAppSlug = "unknown-app"

    /// The `logs` (field 2) in a serialized BatchCreateLogsRequest with a 16-byte
    /// `log_source_id` (field 1), read from the top-level fields only; nil when malformed.
    static func countLogs(_ bytes: [UInt8]) -> Int? {
        var index = 0
        var logs = 0
        var sourceLength = -1
        func varint() -> Int? {
            var value = 0
            var shift = 0
            while index < bytes.count, shift < 64 {
                let byte = bytes[index]
                index += 1
                value |= Int(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
            return nil
        }
        while index < bytes.count {
            guard let key = varint(), key & 7 == 2, let length = varint(), length >= 0, index + length <= bytes.count else { return nil }
            if key >> 3 == 1 { sourceLength = length }
            if key >> 3 == 2 { logs += 1 }
            index += length
        }
        return sourceLength == 16 ? logs : nil
    }

    /// 16 bytes as UUID text (`xxxxxxxx-xxxx-...`); other lengths as hex.
    public static func uuidText(_ bytes: Data) -> String {
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        guard bytes.count == 16 else { return hex }
        let parts = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
            String(hex[hex.index(hex.startIndex, offsetBy: range.lowerBound)..<hex.index(hex.startIndex, offsetBy: range.upperBound)])
        }
        return parts.joined(separator: "-")
    }

    /// The loops every double serves on: its own, not NIO's singleton group, so that decoding
    /// a large batch (a debug build spends seconds on 10 000 boundary logs) does not stall
    /// the agent and clients that share a test process with it. Two threads, for the process's
    /// lifetime, as the singleton's.
    static let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)

    public func run(host: String = "127.0.0.1", port: Int = 0, _ body: @escaping @Sendable (String) async throws -> Void) async throws {
        let group = Self.group
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: WebSocketDialer.maxMessageSize,
            shouldUpgrade: { [self] channel, head in
                let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
                if path == "/echo" { return channel.eventLoop.makeSucceededFuture(HTTPHeaders()) }
                guard path == Self.rpcPath else { return channel.eventLoop.makeSucceededFuture(nil) }
                let refused = refusal(for: head)
                recorded.withLock {
                    $0.upgradeAttempts += 1
                    $0.queries.append(String(head.uri.drop { $0 != "?" }.dropFirst()))
                    $0.upgradeHeaders.append(head.headers.map { ($0.name, $0.value) })
                    if let refused { $0.refusals.append(refused.0) }
                }
                if refused == nil {
                    let id = ObjectIdentifier(channel)
                    rpcConnections.withLock { $0[id] = channel }
                    channel.closeFuture.whenComplete { [self] _ in _ = rpcConnections.withLock { $0.removeValue(forKey: id) } }
                }
                return channel.eventLoop.makeSucceededFuture(refused == nil ? HTTPHeaders() : nil)
            },
            upgradePipelineHandler: { [self] channel, head in
                let delay = head.uri.hasPrefix("/echo") ? .zero : sessionSetupDelay.withLock { $0 }
                let waited = delay > .zero ? channel.eventLoop.scheduleTask(in: delay) {}.futureResult : channel.eventLoop.makeSucceededVoidFuture()
                return waited.flatMapThrowing { [self] in
                    if head.uri.hasPrefix("/echo") {
                        let writer = try WebSocketFraming.installWriter(on: channel)
                        try channel.pipeline.syncOperations.addHandler(EchoHandler(writer: writer))
                        return
                    }
                    let session = try YamuxSession.overWebSocket(channel, role: .server)
                    sessions.withLock { $0.append(session) }
                    _ = rpcConnections.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }
                    recorded.withLock { $0.connections += 1 }
                    // Per connection: methods a test added since the last one are served too.
                    let drpc = makeDRPCServer()
                    session.assumeIsolated { $0.serve(drpc) }
                }
            })
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                let admitted = accepted.withLock { state -> Bool in
                    guard !state.stopped else { return false }
                    state.channels[ObjectIdentifier(channel)] = channel
                    return true
                }
                guard admitted else { return channel.close() }
                channel.closeFuture.whenComplete { [self] _ in
                    _ = accepted.withLock { $0.channels.removeValue(forKey: ObjectIdentifier(channel)) }
                }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withServerUpgrade: (
                            upgraders: [upgrader],
                            completionHandler: { context in
                                context.pipeline.removeHandler(name: "refusals", promise: nil)
                            }
                        ))
                    try channel.pipeline.syncOperations.addHandler(RefusalHandler(double: self), name: "refusals")
                }
            }
        let channel = try await Self.bind(bootstrap, host: host, port: port)
        let port = channel.localAddress?.port ?? 0
        let base = host.contains(":") ? "http://[\(host)]:\(port)" : "http://\(host):\(port)"
        do {
            try await body(base)
        } catch {
            await stopServing(channel)
            throw error
        }
        await stopServing(channel)
    }

    /// Closes the listener, every session and every accepted connection (upgrading ones too).
    private func stopServing(_ listener: any Channel) async {
        try? await listener.close()
        let open = accepted.withLock { state -> [any Channel] in
            state.stopped = true
            defer { state.channels.removeAll() }
            return Array(state.channels.values)
        }
        await dropConnections()
        for connection in open { try? await connection.close() }
    }
}

extension ControlPlaneDouble {
    /// Binds `port`. A fixed port found in use is retried for up to 5 s, every 50 ms: a
    /// client dialing it before the double is up can connect to itself (TCP simultaneous
    /// open) and hold it until it gives that connection up.
    fileprivate static func bind(_ bootstrap: ServerBootstrap, host: String, port: Int) async throws -> any Channel {
        var attempts = 0
        while true {
            do {
                return try await bootstrap.bind(host: host, port: port).get()
            } catch let error as IOError where error.errnoCode == EADDRINUSE && port != 0 && attempts < 100 {
                attempts += 1
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }
}

extension YamuxSession {
    /// Serves dRPC on every stream the agent opens, each call on this session's event loop
    /// (the handlers are quick), so a call costs no thread hops in the double.
    func serve(_ server: DRPCServer) {
        setAcceptHandler { stream in
            // Isolated to the session: the call runs on the loop in the next turn. (Not
            // `Task.immediate`: NIO's executor cannot tell the runtime that a channel
            // handler already runs on it, so the task would not start inline anyway.)
            Task { await self.serveStream(stream, server) }
        }
    }

    private func serveStream(_ stream: YamuxStream, _ server: DRPCServer) async {
        await server.serve(YamuxDRPCTransport(stream: stream))
    }
}

/// Answers what was not upgraded: coderd's refusal for the RPC path, a test's route
/// (``ControlPlaneDouble/handleHTTP(_:_:_:)``), 404 elsewhere.
final class RefusalHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let double: ControlPlaneDouble
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false

    init(double: ControlPlaneDouble) {
        self.double = double
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body(let chunk):
            if body.count + chunk.readableBytes > ControlPlaneDouble.maxRequestBody {
                tooLarge = true
            } else {
                body.append(contentsOf: chunk.readableBytesView)
            }
        case .end:
            guard let head else { return }
            let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
            let answer: DoubleHTTPResponse
            if path == ControlPlaneDouble.rpcPath {
                let (status, text) = double.refusal(for: head) ?? (404, #"{"message":"Route not found."}"#)
                answer = .json(status, text)
            } else if tooLarge {
                answer = .error(413, "Request body too large.")
            } else {
                let request = ControlPlaneDouble.parseRequest(head, body: body)
                if let handler = double.route(request) {
                    let channel = context.channel
                    Task { await DoubleHTTPWriter.write(await handler(request), on: channel) }
                    return
                }
                answer = .json(404, #"{"message":"Route not found."}"#)
            }
            let channel = context.channel
            Task { await DoubleHTTPWriter.write(answer, on: channel) }
        }
    }
}

/// The baseline: echoes binary messages of up to 64 bytes, acknowledges larger ones with
/// one byte, on the event loop, with the same WebSocket framing as the RPC path.
final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame

    let writer: WebSocketFrameWriter

    init(writer: WebSocketFrameWriter) {
        self.writer = writer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .binary, .continuation:
            guard frame.fin else { return }
            let payload = frame.wordUnmaskedData
            let reply = payload.readableBytes <= 64 ? payload : context.channel.allocator.buffer(bytes: [1])
            writer.write(WebSocketFrame(fin: true, opcode: .binary, data: reply))
        case .connectionClose:
            context.close(promise: nil)
        default:
            break
        }
    }
}
