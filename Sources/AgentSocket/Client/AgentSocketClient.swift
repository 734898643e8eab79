import AgentCore
import AgentProto
import DRPC
import NIOCore
import NIOPosix
import SwiftProtobuf
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A client of the agent socket (what `exp sync` uses): one connection per call, dRPC on
/// the raw stream.
public struct AgentSocketClient: Sendable {
    public let path: String

    public init(path: String) {
        self.path = path
    }

    /// Why a call failed, in the reference's words where it has some.
    public enum Failure: Error, CustomStringConvertible {
        /// The socket could not be reached: `connect to agent socket: connect to socket: dial unix ...`
        /// plus, beyond the reference, how to point the client elsewhere.
        case dial(path: String, errno: Int32)
        /// The socket belongs to another agent (`server`) than the one that started this
        /// command (`own`), which runs without a socket: nothing is sent.
        case foreignAgent(path: String, server: Int32, own: Int32)
        /// The socket is served by a process of another user (not root): not the agent.
        case foreignUser(path: String, uid: UInt32)
        /// The call failed (the agent's error text, or a transport failure).
        case call(DRPCCallError)
        /// The call did not end within the timeout it was given: the socket accepted no
        /// connection (`phase` ``TimeoutPhase/connect``, after at most ``connectTimeout``),
        /// or no answer came (``TimeoutPhase/answer``). Its connection is closed.
        case timedOut(path: String, method: String, after: Duration, phase: TimeoutPhase)

        /// What a call that timed out was waiting for.
        public enum TimeoutPhase: Sendable, Equatable {
            case connect, answer
        }

        public var description: String {
            switch self {
            case .dial(let path, let code):
                return "connect to agent socket: connect to socket: dial unix \(path): connect: \(SystemCallError.message(code))"
                    + " (tried \(path); set the path with --socket-path or CODER_AGENT_SOCKET_PATH,"
                    + " and check that the agent runs with its socket server enabled)"
            case .foreignAgent(let path, let server, let own):
                return "connect to agent socket: \(path) is served by another agent (pid \(server)), not the agent that started"
                    + " this command (pid \(own)), which runs without its socket; start that agent with --socket-path"
                    + " (CODER_AGENT_SOCKET_PATH) set to a free path and give this command the same"
            case .foreignUser(let path, let uid):
                return "connect to agent socket: \(path) is served by a process of another user (uid \(uid)), not the agent:"
                    + " refused; set the agent's path with --socket-path or CODER_AGENT_SOCKET_PATH"
            case .call(let error):
                if case .remote(let body) = error { return body.message }
                return error.description
            case .timedOut(let path, _, let after, .connect):
                return "connect to agent socket: dial unix \(path): timed out after \(Self.text(after)): the socket accepts no connection"
                    + " (is the agent stopped?)"
            case .timedOut(let path, let method, let after, .answer):
                return "agent socket \(path): no answer to \(method) within \(Self.text(after))"
                    + " (the agent may be stopped or hung, or another program listens at the path)"
            }
        }

        /// `30s`, `250ms`.
        static func text(_ duration: Duration) -> String {
            let (seconds, attoseconds) = duration.components
            if attoseconds == 0 { return "\(seconds)s" }
            return "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000)ms"
        }

        /// True when the agent does not know the method (an agent without an extension).
        public var isUnsupported: Bool {
            if case .call(let error) = self { return error.isUnsupported }
            return false
        }

        /// True when the connection broke rather than the agent answering with an error.
        public var isTransportFailure: Bool {
            guard case .call(let error) = self else { return false }
            switch error {
            case .unexpectedEOF, .transport, .remoteClosed: return true
            default: return false
            }
        }
    }

    // MARK: Calls

    public func ping() async throws(Failure) {
        _ = try await unary("Ping", Coder_Agentsocket_V1_PingRequest(), as: Coder_Agentsocket_V1_PingResponse.self)
    }

    public func syncWant(_ unit: String, dependsOn: String) async throws(Failure) {
        var request = Coder_Agentsocket_V1_SyncWantRequest()
        request.unit = unit
        request.dependsOn = dependsOn
        _ = try await unary("SyncWant", request, as: Coder_Agentsocket_V1_SyncWantResponse.self)
    }

    public func syncStart(_ unit: String) async throws(Failure) {
        var request = Coder_Agentsocket_V1_SyncStartRequest()
        request.unit = unit
        _ = try await unary("SyncStart", request, as: Coder_Agentsocket_V1_SyncStartResponse.self)
    }

    public func syncComplete(_ unit: String) async throws(Failure) {
        var request = Coder_Agentsocket_V1_SyncCompleteRequest()
        request.unit = unit
        _ = try await unary("SyncComplete", request, as: Coder_Agentsocket_V1_SyncCompleteResponse.self)
    }

    public func syncReady(_ unit: String) async throws(Failure) -> Bool {
        var request = Coder_Agentsocket_V1_SyncReadyRequest()
        request.unit = unit
        return try await unary("SyncReady", request, as: Coder_Agentsocket_V1_SyncReadyResponse.self).ready
    }

    public func syncStatus(_ unit: String) async throws(Failure) -> Coder_Agentsocket_V1_SyncStatusResponse {
        var request = Coder_Agentsocket_V1_SyncStatusRequest()
        request.unit = unit
        return try await unary("SyncStatus", request, as: Coder_Agentsocket_V1_SyncStatusResponse.self)
    }

    public func syncList() async throws(Failure) -> [Coder_Agentsocket_V1_UnitInfo] {
        try await unary("SyncList", Coder_Agentsocket_V1_SyncListRequest(), as: Coder_Agentsocket_V1_SyncListResponse.self).units
    }

    /// Returns whether the agent queued the status (not connected to the control plane).
    public func updateAppStatus(_ request: Coder_Agent_V2_UpdateAppStatusRequest) async throws(Failure) -> Bool {
        let bytes = try await call("UpdateAppStatus", request)
        return bytes.suffix(AgentSocketService.queuedFieldBytes.count).elementsEqual(AgentSocketService.queuedFieldBytes)
    }

    /// The extension: returns once `unit` is ready. Throws a failure whose
    /// ``Failure/isUnsupported`` is true against an agent that lacks it.
    public func waitReady(_ unit: String) async throws(Failure) {
        var request = Coder_Agentsocket_V1_SyncReadyRequest()
        request.unit = unit
        let requestBytes: [UInt8]
        do { requestBytes = try request.serializedBytes() } catch { throw .call(.protocolViolation("\(error)")) }
        try await withConnection("SyncWaitReady") { transport in
            let (sender, start) = DRPCClient.stream(AgentSocketService.waitReadyMethod, over: transport)
            var receiver = start
            try await sender.send(requestBytes)
            try await sender.closeSend()
            guard try await receiver.receive() != nil else { throw DRPCCallError.unexpectedEOF }
        }
    }

    // MARK: Plumbing

    /// The longest a connect waits for a listener that does not accept (its backlog full).
    public static let connectTimeout: Duration = .seconds(10)

    /// Calls `method`; with a `timeout`, the connect, the request and the answer together
    /// take at most that long (the connect at most ``connectTimeout``), else
    /// ``Failure/timedOut(path:method:after:phase:)``.
    func unary<Request: SwiftProtobuf.Message, Response: SwiftProtobuf.Message>(
        _ method: String, _ request: Request, as: Response.Type, timeout: Duration? = nil
    ) async throws(Failure) -> Response {
        let bytes = try await call(method, request, timeout: timeout)
        do {
            return try Response(serializedBytes: bytes)
        } catch {
            throw .call(.protocolViolation("cannot decode \(Response.protoMessageName): \(error)"))
        }
    }

    private func call(_ method: String, _ request: some SwiftProtobuf.Message, timeout: Duration? = nil) async throws(Failure) -> [UInt8] {
        let payload: [UInt8]
        do { payload = try request.serializedBytes() } catch { throw .call(.protocolViolation("\(error)")) }
        let fullMethod = DRPCMethodPath.agentSocket(method)
        return try await withConnection(method, timeout: timeout) { transport in
            try await DRPCClient.unary(fullMethod, request: payload, over: transport)
        }
    }

    /// Runs `body` over a new connection, closed when it returns; a dRPC error of the
    /// call becomes ``Failure/call(_:)``. With a `timeout`, the connection is closed when it
    /// has passed since the call began (which ends a read or write under way at once) and
    /// the call fails with ``Failure/timedOut(path:method:after:phase:)``.
    private func withConnection<Result: Sendable>(
        _ method: String, timeout: Duration? = nil, _ body: (ChannelTransport) async throws -> Result
    ) async throws(Failure) -> Result {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        let channel = try await connect(method: method, timeout: timeout)
        let race = CallRace()
        // Closes the connection at the deadline, unless the call ended first.
        let watchdog = deadline.map { deadline in
            Task { [connection = channel.channel] in
                guard (try? await Task.sleep(until: deadline, clock: .continuous)) != nil, race.timeOut() else { return }
                try? await connection.close()
            }
        }
        defer { watchdog?.cancel() }
        do {
            return try await ChannelTransport.using(channel) { transport in
                // The call's own outcome counts from the moment it has one (the close after
                // it may still be under way when the deadline passes).
                do {
                    let result = try await body(transport)
                    _ = race.end()
                    return result
                } catch {
                    _ = race.end()
                    throw error
                }
            }
        } catch {
            if let timeout, race.timedOut {
                throw .timedOut(path: path, method: method, after: timeout, phase: .answer)
            }
            if let error = error as? DRPCCallError { throw .call(error) }
            throw .call(.transport("\(error)"))
        }
    }

    /// Which came first for one call: its end, or its deadline.
    private final class CallRace: Sendable {
        private let state = Mutex<(ended: Bool, timedOut: Bool)>((false, false))

        /// The call has its outcome; false when the deadline came first.
        func end() -> Bool {
            state.withLock { s in
                if s.timedOut { return false }
                s.ended = true
                return true
            }
        }

        /// The deadline passed; true when the call had not ended (close its connection).
        func timeOut() -> Bool {
            state.withLock { s in
                if s.ended { return false }
                s.timedOut = true
                return true
            }
        }

        var timedOut: Bool { state.withLock { $0.timedOut } }
    }

    /// Connects with a plain `connect(2)` (so a failure names its errno as Go's dialer
    /// does), then hands the socket to NIO. A listener that does not accept is waited for at
    /// most `timeout` (and ``connectTimeout``); given a `timeout`, that wait's end is
    /// ``Failure/timedOut(path:method:after:phase:)``, else the dial's EAGAIN.
    func connect(method: String, timeout: Duration? = nil) async throws(Failure) -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
        let bound = min(timeout ?? Self.connectTimeout, Self.connectTimeout)
        let fd: Int32
        switch UnixSocket.connect(path, timeout: bound) {
        case .success(let connected): fd = connected
        case .failure(let error) where error.errno == EAGAIN && timeout != nil:
            throw .timedOut(path: path, method: method, after: bound, phase: .connect)
        case .failure(let error): throw .dial(path: path, errno: error.errno)
        }
        // Only a server of this user or root (or, for root, the agent that started this
        // command) is the agent: a shared /tmp lets anyone listen at the default path first.
        if let peer = PeerProcess.credentials(of: fd), !PeerProcess.mayServe(uid: peer.uid, pid: peer.pid) {
            close(fd)
            throw .foreignUser(path: path, uid: peer.uid)
        }
        // A command an agent started talks only to that agent: a second agent whose path
        // another holds must not have its commands land in the first one's units.
        if let own = PeerProcess.nearestAncestorRunningThisExecutable(), let server = PeerProcess.of(socket: fd), server != own {
            close(fd)
            throw .foreignAgent(path: path, server: server, own: own)
        }
        do {
            return try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelOption(.allowRemoteHalfClosure, value: true)
                .withConnectedSocket(fd) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(
                            wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                    }
                }
        } catch {
            throw .call(.transport("\(error)"))
        }
    }
}
