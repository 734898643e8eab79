import AgentCore
import AgentProto
import DRPC
import Foundation
import SwiftProtobuf
import Synchronization

/// PushContextState (Agent API v2.10) as coderd serves it: every push is validated against
/// coderd's limits (any violation fails the whole call, texts as coderd's), then accepted
/// when it is the connection's first (`initial`) or newer than the stored version.
extension ControlPlaneDouble {
    /// coderd's caps on one push.
    public enum ContextLimits {
        public static let resources = 1000
        /// The protojson encoding of one body (the double uses SwiftProtobuf's JSON, close to Go's).
        public static let bodyBytes = 256 * 1024
        public static let aggregateBodyBytes = 4 * 1024 * 1024
        public static let sourceBytes = 1024
        public static let errorBytes = 4096
        public static let hashBytes = 64
    }

    /// What the double holds after the pushes so far.
    public struct ContextState: Sendable {
        /// Every push that passed validation, accepted or not, in arrival order.
        public var pushes: [Coder_Agent_V2_PushContextStateRequest] = []
        /// The stored snapshot: the last accepted push.
        public var stored: Coder_Agent_V2_PushContextStateRequest?
        /// Pushes refused as RPC errors, with coderd's message.
        public var rejections: [String] = []
        /// When set, every push is answered with dRPC Unimplemented (code 12), as a coderd
        /// with context sync disabled or from before v2.10.
        public var unimplemented = false
        /// Calls answered with Unimplemented (they are in neither ``pushes`` nor ``rejections``).
        public var unimplementedAnswers = 0
    }

    func registerContextState(on server: inout DRPCServer) {
        server.register(DRPCMethodPath.agent("PushContextState")) { bytes in
            let unimplemented = self.contextState.withLock { state -> Bool in
                if state.unimplemented { state.unimplementedAnswers += 1 }
                return state.unimplemented
            }
            if unimplemented {
                throw DRPCErrorBody(
                    code: DRPCErrorBody.unimplemented,
                    message: "agentapi: workspace agent context sync is disabled on this deployment")
            }
            let request = try Coder_Agent_V2_PushContextStateRequest(serializedBytes: bytes)
            if let problem = Self.contextPushProblem(request) {
                self.contextState.withLock { $0.rejections.append(problem) }
                throw DRPCErrorBody(code: 0, message: problem)
            }
            let accepted = self.contextState.withLock { state -> Bool in
                state.pushes.append(request)
                if let stored = state.stored, !request.initial, request.version <= stored.version { return false }
                state.stored = request
                return true
            }
            var response = Coder_Agent_V2_PushContextStateResponse()
            response.accepted = accepted
            return try response.serializedBytes()
        }
    }

    /// coderd's validation of a push: nil when it passes, else the error coderd returns.
    public static func contextPushProblem(_ request: Coder_Agent_V2_PushContextStateRequest) -> String? {
        let prefix = "agentapi: PushContextState"
        if request.version > UInt64(Int64.max) {
            return "\(prefix) version \(request.version) exceeds int64 range"
        }
        if request.aggregateHash.count > ContextLimits.hashBytes {
            return "\(prefix) aggregate hash is \(request.aggregateHash.count) bytes, exceeds \(ContextLimits.hashBytes) byte cap"
        }
        if request.snapshotError.utf8.count > ContextLimits.errorBytes {
            return "\(prefix) snapshot error is \(request.snapshotError.utf8.count) bytes, exceeds \(ContextLimits.errorBytes) byte cap"
        }
        if request.resources.count > ContextLimits.resources {
            return "\(prefix) has \(request.resources.count) resources, exceeds \(ContextLimits.resources) resource cap"
        }
        var seen = Set<String>()
        var aggregate = 0
        for (index, resource) in request.resources.enumerated() {
            let source = resource.source
            let sourceBytes = source.utf8.count
            if source.isEmpty { return "\(prefix) resource at index \(index) has empty source" }
            if sourceBytes > ContextLimits.sourceBytes {
                return "\(prefix) resource at index \(index) has \(sourceBytes) byte source, exceeds \(ContextLimits.sourceBytes) byte cap"
            }
            if !seen.insert(source).inserted { return "\(prefix) duplicate source \(goQuote(source))" }
            let named = "resource \(goQuote(source))"
            if resource.sourcePath.utf8.count > ContextLimits.sourceBytes {
                return "\(named): source path is \(resource.sourcePath.utf8.count) bytes, exceeds \(ContextLimits.sourceBytes) byte cap"
            }
            if resource.error.utf8.count > ContextLimits.errorBytes {
                return "\(named): error is \(resource.error.utf8.count) bytes, exceeds \(ContextLimits.errorBytes) byte cap"
            }
            if resource.contentHash.count > ContextLimits.hashBytes {
                return "\(named): content hash is \(resource.contentHash.count) bytes, exceeds \(ContextLimits.hashBytes) byte cap"
            }
            if resource.sizeBytes > UInt64(Int64.max) {
                return "\(named): size \(resource.sizeBytes) exceeds int64 range"
            }
            let body: Int
            do {
                body = try bodyJSONBytes(resource)
            } catch {
                return "\(named): \(error)"
            }
            if body > ContextLimits.bodyBytes {
                return "\(named): body is \(body) bytes, exceeds \(ContextLimits.bodyBytes) byte cap"
            }
            aggregate += body
            if aggregate > ContextLimits.aggregateBodyBytes {
                return "\(prefix) aggregate body size exceeds \(ContextLimits.aggregateBodyBytes) byte cap"
            }
            guard (1...5).contains(resource.status.rawValue) else {
                return "\(named): unknown status \(resource.status.rawValue)"
            }
        }
        return nil
    }

    private struct MissingBody: Error, CustomStringConvertible {
        var status: Coder_Agent_V2_ContextResource.Status
        var description: String { "missing body variant; status \(statusName(status)) requires a typed body" }
    }

    /// The enum value's name as Go's generated `String()` prints it (a number when unknown).
    static func statusName(_ status: Coder_Agent_V2_ContextResource.Status) -> String {
        switch status {
        case .unspecified: "STATUS_UNSPECIFIED"
        case .ok: "OK"
        case .oversize: "OVERSIZE"
        case .unreadable: "UNREADABLE"
        case .invalid: "INVALID"
        case .excluded: "EXCLUDED"
        case .UNRECOGNIZED(let value): "\(value)"
        }
    }

    /// The size of the body as coderd stores it (protojson with the proto's field names).
    private static func bodyJSONBytes(_ resource: Coder_Agent_V2_ContextResource) throws -> Int {
        func size(_ body: some SwiftProtobuf.Message) throws -> Int {
            var options = JSONEncodingOptions()
            options.preserveProtoFieldNames = true
            let json: [UInt8] = try body.jsonUTF8Bytes(options: options)
            return json.count
        }
        switch resource.body {
        case .instructionFile(let body): return try size(body)
        case .skill(let body): return try size(body)
        case .mcpConfig(let body): return try size(body)
        case .mcpServer(let body): return try size(body)
        case nil: throw MissingBody(status: resource.status)
        }
    }
}
