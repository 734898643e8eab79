import AgentCore
import AgentHTTP
import Hummingbird

/// `GET /api/v0/scripts` (every script with its state, last runs and log path, and the
/// lifecycle state) and `POST /api/v0/scripts/{id}/run` (one more run now, reported with
/// its own `ScriptCompleted`; 202 with the run's number).
struct ScriptsRoutes: Sendable {
    let runner: ScriptRunner

    /// The answer of a run request.
    struct RunAccepted: Encodable, Sendable {
        var scriptID: String
        var run: Int
        enum CodingKeys: String, CodingKey { case scriptID = "script_id", run }
    }

    /// The status is copied from memory under the runner's lock (on the loop); a run starts
    /// a thread (on the pool).
    func add(to routes: inout AgentRoutes) {
        let runner = self.runner
        routes.get(executor: .eventLoop) { _, _ in JSONResponse.make(runner.status()) }
        routes.post(":id/run") { _, context in
            let text = context.parameters.get("id") ?? ""
            guard let id = UUIDText.parse(text) else {
                throw APIError(.badRequest, "Invalid script ID.", detail: "\"\(text)\" is not a UUID.")
            }
            do throws(ScriptRunner.RunRequestError) {
                let run = try runner.runNow(id: id)
                return JSONResponse.make(RunAccepted(scriptID: UUIDText.format(id), run: run), status: .accepted)
            } catch {
                switch error {
                case .unknownScript:
                    throw APIError(.notFound, "Script not found.", detail: "No script with ID \(UUIDText.format(id)) in the manifest.")
                case .notReady:
                    throw APIError(.conflict, "No manifest yet.", detail: "Scripts run once the control plane's manifest has arrived.")
                case .shuttingDown:
                    throw APIError(.conflict, "The agent is shutting down.")
                case .busy:
                    throw APIError(.conflict, "The script is already running \(ScriptRunner.maxOverlappingRuns) times.")
                }
            }
        }
    }
}
