import AgentCore
import AgentHTTP
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Hummingbird

/// `POST /api/v0/desktop/recording/start|stop`. Recordings are made by
/// portabledesktop (`record`) of a desktop it runs; without one the agent answers 501 with
/// a clear message after the same body checks as the reference.
struct RecordingRoutes: Sendable {
    let supervisor: DesktopSupervisor
    let recorder: Recorder

    struct Body: Decodable {
        var recordingId: String?
        enum CodingKeys: String, CodingKey { case recordingId = "recording_id" }
    }

    /// The recording id from the body, with the reference's 400s.
    static func recordingID(_ request: Request, _ context: AgentRequestContext) async throws -> String {
        var request = request
        let bytes = try await request.collectBody(upTo: 64 << 10)
        let body: Body
        do {
            body = try JSONDecoder().decode(Body.self, from: Data(bytes.readableBytesView))
        } catch {
            throw APIError(.badRequest, "Failed to decode request body.", detail: "\(error)")
        }
        guard let id = body.recordingId, !id.isEmpty else { throw APIError(.badRequest, "Missing recording_id.") }
        guard let canonical = ChatIdentity.canonicalUUID(id) else {
            throw APIError(.badRequest, "Invalid recording_id format.", detail: "recording_id must be a valid UUID.")
        }
        return canonical
    }

    func start(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let id = try await Self.recordingID(request, context)
        try await recorder.start(id: id)
        return JSONResponse.make(["message": "Recording started."])
    }

    func stop(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let id = try await Self.recordingID(request, context)
        return try await recorder.stop(id: id)
    }
}
