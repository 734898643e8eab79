import AgentCore
import AgentProto
import DRPC
import SwiftProtobuf

/// The chat context RPCs, with the reference's errors: `context manager not available`
/// without a ``ContextControl``, `"<path>": context source not found`, and the manager's
/// validation texts behind `add context source: ` / `remove context source: `.
extension AgentSocketService {
    /// A path longer than this is refused before it is looked at or quoted back (the
    /// kernel's PATH_MAX; a longer one cannot name a file).
    public static let maxContextPathBytes = 4096

    /// The snapshot answers are cut to this many bytes of resources (under dRPC's 4 MiB
    /// packet); the rest are left out and `snapshot_error` says so when it is otherwise empty.
    public static let maxSnapshotAnswerBytes = 3 * 1024 * 1024

    static let contextUnavailable = "context manager not available"

    func registerContext(on server: inout CountingServer) {
        contextCall("ContextSources", on: &server) { control in
            var response = Coder_Agentsocket_V1_ContextSourcesResponse()
            response.sources = control.sources.map(Self.source)
            return response
        }
        contextCall("GetContextSource", Coder_Agentsocket_V1_GetContextSourceRequest.self, on: &server) { request, control in
            try Self.checkPath(request.path, prefix: "")
            let path: String
            do throws(ContextControlError) {
                path = try control.registeredSource(request.path)
            } catch {
                // As the reference: a path with no lexical form is not a registered one.
                throw SocketError("\(goQuote(request.path)): context source not found")
            }
            var response = Coder_Agentsocket_V1_GetContextSourceResponse()
            response.source = Self.source(path)
            return response
        }
        contextCall("AddContextSource", Coder_Agentsocket_V1_AddContextSourceRequest.self, on: &server) { request, control in
            try Self.checkPath(request.path, prefix: "add context source: ")
            let path: String
            do throws(ContextControlError) {
                path = try control.registerSource(request.path)
            } catch {
                throw SocketError("add context source: \(error)")
            }
            var response = Coder_Agentsocket_V1_AddContextSourceResponse()
            response.source = Self.source(path)
            return response
        }
        contextCall("RemoveContextSource", Coder_Agentsocket_V1_RemoveContextSourceRequest.self, on: &server) { request, control in
            try Self.checkPath(request.path, prefix: "remove context source: ")
            do throws(ContextControlError) {
                try control.unregisterSource(request.path)
            } catch {
                if case .notFound = error { throw SocketError("\(goQuote(request.path)): context source not found") }
                throw SocketError("remove context source: \(error)")
            }
            return Coder_Agentsocket_V1_RemoveContextSourceResponse()
        }
        contextCall("GetContextSnapshot", on: &server) { control in
            var response = Coder_Agentsocket_V1_ContextSnapshotResponse()
            response.snapshot = Self.wire(control.snapshot)
            return response
        }
        contextCall("ResyncContext", on: &server) { control in
            let snapshot: ContextSnapshot
            do {
                snapshot = try await control.resyncSnapshot()
            } catch {
                throw SocketError("resync context: \(error)")
            }
            var response = Coder_Agentsocket_V1_ResyncContextResponse()
            response.snapshot = Self.wire(snapshot)
            return response
        }
    }

    /// One context RPC: its request decoded, then the context control (or the reference's
    /// "not available"), then `body`'s answer encoded.
    private func contextCall<Request: SwiftProtobuf.Message, Response: SwiftProtobuf.Message>(
        _ method: String, _ request: Request.Type, on server: inout CountingServer,
        _ body: @escaping @Sendable (Request, any ContextControl) async throws -> Response
    ) {
        server.register(DRPCMethodPath.agentSocket(method)) { bytes in
            let request = try Request(serializedBytes: bytes)
            return try await body(request, try self.contextControl()).serializedBytes()
        }
    }

    /// One context RPC whose request carries nothing (its bytes are not read).
    private func contextCall<Response: SwiftProtobuf.Message>(
        _ method: String, on server: inout CountingServer,
        _ body: @escaping @Sendable (any ContextControl) async throws -> Response
    ) {
        server.register(DRPCMethodPath.agentSocket(method)) { _ in
            try await body(try self.contextControl()).serializedBytes()
        }
    }

    func contextControl() throws(SocketError) -> any ContextControl {
        guard let context else { throw SocketError(Self.contextUnavailable) }
        return context
    }

    static func checkPath(_ path: String, prefix: String) throws(SocketError) {
        let count = path.utf8.count
        guard count <= maxContextPathBytes else {
            throw SocketError("\(prefix)path of \(count) bytes is longer than \(maxContextPathBytes) bytes")
        }
    }

    static func source(_ path: String) -> Coder_Agentsocket_V1_ContextSource {
        var source = Coder_Agentsocket_V1_ContextSource()
        source.path = path
        return source
    }

    /// The snapshot on the wire: hashes in hex, no payloads or tools, at most
    /// ``maxSnapshotAnswerBytes`` of resources.
    static func wire(_ snapshot: ContextSnapshot, budget: Int = maxSnapshotAnswerBytes) -> Coder_Agentsocket_V1_ContextSnapshot {
        var out = Coder_Agentsocket_V1_ContextSnapshot()
        out.version = snapshot.version
        out.aggregateHash = SHA256.hexString(snapshot.aggregateHash)
        out.payloadBytes = snapshot.payloadBytes
        out.snapshotError = snapshot.snapshotError
        var used = 0
        for resource in snapshot.resources {
            var r = Coder_Agentsocket_V1_ContextResource()
            r.id = resource.id
            r.kind = resource.kind.name
            r.source = resource.source
            r.sourcePath = resource.sourcePath ?? ""
            r.contentHash = SHA256.hexString(resource.contentHash)
            r.sizeBytes = resource.sizeBytes
            r.status = resource.status.name
            r.error = resource.error
            r.name = resource.name
            r.description_p = resource.description
            // The field's tag and length prefix: at most 1 + 5 bytes.
            let size = ((try? r.serializedBytes() as [UInt8])?.count ?? 0) + 6
            guard used + size <= budget else { break }
            used += size
            out.resources.append(r)
        }
        if out.resources.count < snapshot.resources.count, out.snapshotError.isEmpty {
            out.snapshotError = "snapshot lists \(out.resources.count) of \(snapshot.resources.count) resources"
        }
        return out
    }
}
