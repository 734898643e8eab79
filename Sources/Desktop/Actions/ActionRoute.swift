import AgentCore
import AgentHTTP
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import CoreMetrics
import Hummingbird

/// `POST /api/v0/desktop/action`: counts as activity, starts the desktop
/// (500 before the body is read, as the reference), decodes and checks the body (400), runs
/// the action, and cancels it if its client goes away (as the reference's request context):
/// a `hold_key` then releases its keys at once and a queued action never runs.
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
        let decoded = try DesktopAction.decodeRequest(Array(body.readableBytesView))
        let action: DesktopAction
        do {
            action = try DesktopAction.validate(decoded)
        } catch {
            let name = DesktopActionName(rawValue: decoded.action ?? "")?.rawValue ?? "unknown"
            DesktopMetrics.action(name, "client_error").increment()
            throw error
        }
        return JSONResponse.make(try await Self.cancellingWhenGone(context.clientGone) { () throws(APIError) in try await runner.run(action) })
    }

    /// Runs `work` in a task of its own that is cancelled when `gone` reports (Hummingbird
    /// does not cancel a handler whose client went away) or the caller is cancelled; the
    /// registration is withdrawn when it ends.
    static func cancellingWhenGone<T: Sendable>(
        _ gone: any GoneSignal, _ work: @escaping @Sendable () async throws(APIError) -> T
    ) async throws(APIError) -> T {
        let task = Task { () -> Result<T, APIError> in
            do throws(APIError) {
                return .success(try await work())
            } catch {
                return .failure(error)
            }
        }
        let registration = gone.whenGone { task.cancel() }
        defer { registration.cancel() }
        return try await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }.get()
    }
}
