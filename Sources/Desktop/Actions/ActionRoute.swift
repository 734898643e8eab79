import AgentHTTP
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Hummingbird

/// `POST /api/v0/desktop/action` (spec desktop §2.1): counts as activity, starts the desktop
/// (500 before the body is read, as the reference), decodes the body (400), runs the action.
struct ActionRoute: Sendable {
    let supervisor: DesktopSupervisor
    let runner: ActionRunner
    /// Action bodies are small; `type` text is the largest part.
    static let maxBody = 1 << 20

    func handle(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        await supervisor.recordActivity()
        do {
            _ = try await supervisor.ensureStarted()
        } catch {
            throw APIError(.internalServerError, "Failed to start desktop session.", detail: error.description)
        }
        var request = request
        let body = try await request.collectBody(upTo: Self.maxBody)
        let action: DesktopActionRequest
        do {
            action = try JSONDecoder().decode(DesktopActionRequest.self, from: Data(body.readableBytesView))
        } catch {
            throw APIError(.badRequest, "Failed to decode request body.", detail: "\(error)")
        }
        return JSONResponse.make(try await runner.run(action))
    }
}
