import AgentProto
import DRPC
import SwiftProtobuf
import Yamux

/// Typed calls of `coder.agent.v2.Agent`, each on a fresh yamux stream with a fresh dRPC
/// connection (stream ID 1), as the reference agent does.
public struct AgentAPIClient: Sendable {
    public let session: YamuxSession

    public init(session: YamuxSession) {
        self.session = session
    }

    /// One unary call: encode, open a stream, call, decode.
    public func call<Request: SwiftProtobuf.Message, Response: SwiftProtobuf.Message>(
        _ method: String, _ request: Request, returning: Response.Type = Response.self
    ) async throws -> Response {
        let bytes: [UInt8] = try request.serializedBytes()
        let reply = try await session.unaryCall(DRPCMethodPath.agent(method), request: bytes)
        return try Response(serializedBytes: reply)
    }

    public func getManifest() async throws -> Coder_Agent_V2_Manifest {
        try await call("GetManifest", Coder_Agent_V2_GetManifestRequest())
    }

    public func updateStartup(
        version: String, expandedDirectory: String, subsystems: [Coder_Agent_V2_Startup.Subsystem] = []
    ) async throws -> Coder_Agent_V2_Startup {
        var request = Coder_Agent_V2_UpdateStartupRequest()
        request.startup.version = version
        request.startup.expandedDirectory = expandedDirectory
        request.startup.subsystems = subsystems
        return try await call("UpdateStartup", request)
    }

    public func updateLifecycle(_ lifecycle: Coder_Agent_V2_Lifecycle) async throws -> Coder_Agent_V2_Lifecycle {
        var request = Coder_Agent_V2_UpdateLifecycleRequest()
        request.lifecycle = lifecycle
        return try await call("UpdateLifecycle", request)
    }

    public func batchCreateLogs(_ request: Coder_Agent_V2_BatchCreateLogsRequest) async throws -> Coder_Agent_V2_BatchCreateLogsResponse {
        try await call("BatchCreateLogs", request)
    }

    public func reportBoundaryLogs(_ request: Coder_Agent_V2_ReportBoundaryLogsRequest) async throws {
        let _: Coder_Agent_V2_ReportBoundaryLogsResponse = try await call("ReportBoundaryLogs", request)
    }

    public func updateAppStatus(_ request: Coder_Agent_V2_UpdateAppStatusRequest) async throws {
        let _: Coder_Agent_V2_UpdateAppStatusResponse = try await call("UpdateAppStatus", request)
    }

    public func reportConnection(_ request: Coder_Agent_V2_ReportConnectionRequest) async throws {
        let _: Google_Protobuf_Empty = try await call("ReportConnection", request)
    }
}

/// A yamux stream as a dRPC transport: graceful end is FIN (reading stops), abort is RST.
public struct YamuxDRPCTransport: DRPCTransport {
    public let stream: YamuxStream

    public init(stream: YamuxStream) {
        self.stream = stream
    }

    nonisolated(nonsending) public func read() async throws -> [UInt8]? { try await stream.read() }
    nonisolated(nonsending) public func write(_ bytes: [UInt8]) async throws { try await stream.write(bytes) }
    nonisolated(nonsending) public func closeWrite() async { await stream.close() }
    nonisolated(nonsending) public func close() async { await stream.reset() }
}
