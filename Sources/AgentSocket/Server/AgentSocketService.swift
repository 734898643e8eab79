import AgentCore
import AgentProto
import CoreMetrics
import DRPC
import SwiftProtobuf

/// The `coder.agentsocket.v1.AgentSocket` service on a dRPC server:
/// Ping, the Sync calls on a ``UnitManager``, UpdateAppStatus through the upward seam, the
/// chat context calls on a ``ContextControl`` (when given one), and one extension,
/// `SyncWaitReady`.
public struct AgentSocketService: Sendable {
    /// Extension (not in the reference): a server-streaming call that sends one
    /// `SyncReadyResponse{ready: true}` as soon as the unit is ready, then ends. The CLI's
    /// `start` uses it and falls back to polling SyncReady against an agent without it.
    public static let waitReadyMethod = DRPCMethodPath.agentSocket("SyncWaitReady")

    /// Extension: field 15 (`queued`, bool) of `UpdateAppStatusResponse`, set when the agent
    /// accepted the status while not connected to the control plane and will send it after
    /// reconnecting. Clients that do not know it ignore it (proto3 unknown field).
    public static let queuedFieldBytes: [UInt8] = [0x78, 0x01]

    /// How long UpdateAppStatus waits for the control plane's answer while connected.
    public static let appStatusReplyTimeout: Duration = .seconds(30)

    public let units: UnitManager
    public let upward: any UpwardSink
    /// The chat context the context calls act on; without one they answer
    /// `context manager not available`, as the reference's socket without a manager.
    public let context: (any ContextControl)?
    /// Serve `SyncWaitReady`; off, the service is the reference's exactly (compatibility
    /// tests run the CLI against it).
    public var servesExtensions = true
    /// The MCP engine's catalog, through which the MCP extensions reach the engine
    /// (``registerMCP(on:)``); without one they answer `MCP engine not available`.
    public var mcpCatalog: MCPCatalog?
    /// coderd as the agent, for ``coderdGetMethod``; nil answers `no control plane`.
    public var coderREST: (any CoderRESTRequesting)?

    public init(units: UnitManager, upward: any UpwardSink, context: (any ContextControl)? = nil) {
        self.units = units
        self.upward = upward
        self.context = context
    }

    /// A dRPC server with every method registered.
    public func makeServer() -> DRPCServer {
        var server = CountingServer()
        server.register(DRPCMethodPath.agentSocket("Ping")) { _ in
            try Coder_Agentsocket_V1_PingResponse().serializedBytes()
        }
        server.register(DRPCMethodPath.agentSocket("SyncStart")) { bytes in
            let request = try Coder_Agentsocket_V1_SyncStartRequest(serializedBytes: bytes)
            try Self.checkNames(request.unit)
            try self.syncStart(request.unit)
            return try Coder_Agentsocket_V1_SyncStartResponse().serializedBytes()
        }
        server.register(DRPCMethodPath.agentSocket("SyncWant")) { bytes in
            let request = try Coder_Agentsocket_V1_SyncWantRequest(serializedBytes: bytes)
            try Self.checkNames(request.unit, request.dependsOn)
            try self.syncWant(request.unit, dependsOn: request.dependsOn)
            return try Coder_Agentsocket_V1_SyncWantResponse().serializedBytes()
        }
        server.register(DRPCMethodPath.agentSocket("SyncComplete")) { bytes in
            let request = try Coder_Agentsocket_V1_SyncCompleteRequest(serializedBytes: bytes)
            try Self.checkNames(request.unit)
            do {
                try self.units.updateStatus(request.unit, .completed)
            } catch {
                throw SocketError("cannot complete unit \(goQuote(request.unit)): \(error)")
            }
            return try Coder_Agentsocket_V1_SyncCompleteResponse().serializedBytes()
        }
        server.register(DRPCMethodPath.agentSocket("SyncReady")) { bytes in
            let request = try Coder_Agentsocket_V1_SyncReadyRequest(serializedBytes: bytes)
            try Self.checkNames(request.unit)
            var response = Coder_Agentsocket_V1_SyncReadyResponse()
            do {
                response.ready = try self.units.isReady(request.unit)
            } catch {
                throw SocketError("cannot check readiness: \(error)")
            }
            return try response.serializedBytes()
        }
        server.register(DRPCMethodPath.agentSocket("SyncStatus")) { bytes in
            let request = try Coder_Agentsocket_V1_SyncStatusRequest(serializedBytes: bytes)
            try Self.checkNames(request.unit)
            return try self.syncStatus(request.unit).serializedBytes()
        }
        server.register(DRPCMethodPath.agentSocket("SyncList")) { _ in
            var response = Coder_Agentsocket_V1_SyncListResponse()
            response.units = self.units.list().map { info in
                var unit = Coder_Agentsocket_V1_UnitInfo()
                unit.unit = info.unit
                unit.status = info.status.rawValue
                unit.isReady = info.isReady
                return unit
            }
            return try response.serializedBytes()
        }
        server.register(DRPCMethodPath.agentSocket("UpdateAppStatus")) { bytes in
            let request = try Coder_Agent_V2_UpdateAppStatusRequest(serializedBytes: bytes)
            return try await self.updateAppStatus(request)
        }
        registerContext(on: &server)
        if servesExtensions {
            registerMCP(on: &server)
            registerCoderd(on: &server)
        }
        guard servesExtensions else { return server.server }
        server.registerStream(Self.waitReadyMethod) { call in
            guard let bytes = try await call.receive() else { return }
            let request = try Coder_Agentsocket_V1_SyncReadyRequest(serializedBytes: bytes)
            guard !request.unit.isEmpty else { throw SocketError("cannot check readiness: unit ID cannot be empty: unit name is required") }
            try Self.checkNames(request.unit)
            try await self.units.waitUntilReady(request.unit)
            try Task.checkCancellation()
            var response = Coder_Agentsocket_V1_SyncReadyResponse()
            response.ready = true
            try await call.send(try response.serializedBytes())
        }
        return server.server
    }

    // MARK: Calls

    /// Refuses any name over ``UnitManager/maxNameBytes`` before anything is stored or
    /// quoted back (the answer names the length, not the name).
    static func checkNames(_ names: String...) throws(SocketError) {
        for name in names {
            do {
                try UnitManager.checkName(name)
            } catch {
                throw SocketError(error.description)
            }
        }
    }

    func syncStart(_ unit: String) throws(SocketError) {
        do {
            try units.register(unit)
        } catch  where error.description == "unit already registered" {
            // Already registered: fine.
        } catch {
            throw SocketError("SyncStart: registering unit \(goQuote(unit)): \(error)")
        }
        guard (try? units.isReady(unit)) ?? false else {
            throw SocketError("cannot start unit \(goQuote(unit)): unit not ready")
        }
        do {
            try units.updateStatus(unit, .started)
        } catch {
            throw SocketError("cannot start unit \(goQuote(unit)): \(error)")
        }
    }

    func syncWant(_ unit: String, dependsOn: String) throws(SocketError) {
        do {
            try units.register(unit)
        } catch  where error.description == "unit already registered" {
        } catch {
            throw SocketError("cannot add dependency: registering unit \(goQuote(unit)): \(error)")
        }
        do {
            try units.addDependency(unit, dependsOn: dependsOn, required: .completed)
        } catch {
            throw SocketError("cannot add dependency: \(error)")
        }
    }

    func syncStatus(_ unit: String) throws(SocketError) -> Coder_Agentsocket_V1_SyncStatusResponse {
        // The reference asks readiness first, whose error this is.
        guard !unit.isEmpty else { throw SocketError("cannot check readiness: unit ID cannot be empty: unit name is required") }
        let (status, ready, dependencies) = units.status(unit)
        var response = Coder_Agentsocket_V1_SyncStatusResponse()
        response.status = status?.rawValue ?? ""
        response.isReady = ready
        response.dependencies = dependencies.map { dependency in
            var info = Coder_Agentsocket_V1_DependencyInfo()
            info.unit = dependency.unit
            info.dependsOn = dependency.dependsOn
            info.requiredStatus = dependency.required.rawValue
            info.currentStatus = dependency.current?.rawValue ?? ""
            info.isSatisfied = dependency.isSatisfied
            return info
        }
        return response
    }

    /// Checks what the control plane would refuse at once, queues the status upward and,
    /// while connected, waits for the control plane's answer (its error reaches the
    /// caller unchanged). Disconnected, it answers at once with the `queued` extension.
    func updateAppStatus(_ request: Coder_Agent_V2_UpdateAppStatusRequest) async throws -> [UInt8] {
        guard request.message.utf8.count <= AppStatusReport.maxMessageBytes else {
            throw SocketError("Message is too long.")
        }
        guard request.slug.utf8.count <= AppStatusReport.maxSlugBytes else {
            throw SocketError("Slug is too long (at most \(AppStatusReport.maxSlugBytes) bytes).")
        }
        guard request.uri.utf8.count <= AppStatusReport.maxURIBytes else {
            throw SocketError("URI is too long (at most \(AppStatusReport.maxURIBytes) bytes).")
        }
        guard let state = AppStatusReport.State(rawValue: request.state.rawValue) else {
            throw SocketError("Invalid state provided.")
        }
        let connected = upward.isConnected
        let receipt = upward.send(AppStatusReport(slug: request.slug, state: state, message: request.message, uri: request.uri))
        let empty = try Coder_Agent_V2_UpdateAppStatusResponse().serializedBytes() as [UInt8]
        // Standalone there is nothing to queue for: the status is logged, and that is all.
        guard upward.hasControlPlane else { return empty }
        guard connected else { return empty + Self.queuedFieldBytes }
        let outcome = await withTaskGroup(of: UpwardOutcome?.self) { group in
            group.addTask { await receipt.wait() }
            group.addTask {
                try? await Task.sleep(for: Self.appStatusReplyTimeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        switch outcome {
        case .delivered, .logged: return empty
        case .rejected(let reason): throw SocketError(reason)
        case .dropped: throw SocketError("app status dropped: the agent's app status queue is full")
        case .abandoned: throw SocketError("agent is shutting down")
        case nil: return empty + Self.queuedFieldBytes
        }
    }
}

/// A dRPC server whose methods count their calls in `agent_socket_calls_total`.
struct CountingServer {
    var server = DRPCServer()

    mutating func register(_ method: String, _ handler: @escaping DRPCServer.UnaryHandler) {
        let counter = SocketMetrics.call(String(method.split(separator: "/").last ?? ""))
        server.register(method) { request in
            counter.increment()
            return try await handler(request)
        }
    }

    mutating func registerStream(_ method: String, _ handler: @escaping DRPCServer.StreamHandler) {
        let counter = SocketMetrics.call(String(method.split(separator: "/").last ?? ""))
        server.registerStream(method) { call in
            counter.increment()
            try await handler(call)
        }
    }
}

/// An error answered to the client: its text is sent as is (code 0), as the reference does.
struct SocketError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
