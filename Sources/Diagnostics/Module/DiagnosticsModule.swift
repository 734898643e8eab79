import AgentCore
import AgentHTTP
import AgentLogging
import Hummingbird

/// The agent's own answers about itself and the workspace, on the HTTP API's root: `GET /`
/// (hello), `GET /api/v0/listening-ports`, `GET /debug/manifest`, `GET /debug/logs`, and
/// the containers API answering 403 (dev containers are not supported by this agent).
public struct DiagnosticsModule: HTTPModule {
    public var name: String { "diagnostics" }

    let manifest: any ManifestSource
    let recentLogs: RecentLogs
    let ports: ListeningPortCache

    /// - Parameter ignoredPorts: the agent's own listeners (metrics, debug), never listed.
    public init(context: AgentContext, recentLogs: RecentLogs, ignoredPorts: OwnListenerPorts = OwnListenerPorts()) {
        manifest = context.manifest
        self.recentLogs = recentLogs
        ports = ListeningPortCache(scanner: ListeningPortScanner(ignored: ignoredPorts))
    }

    /// The containers API's routes as the reference mounts them; with dev containers off
    /// (always, here) each answers 403.
    static let containerRoutes: [(HTTPRequest.Method, String)] = [
        (.get, "api/v0/containers"), (.get, "api/v0/containers/watch"),
        (.post, "api/v0/containers/devcontainers/:id/recreate"), (.delete, "api/v0/containers/devcontainers/:id"),
    ]

    public func routes(_ routes: inout AgentRoutes) {
        routes.get("", executor: .eventLoop) { _, _ in
            JSONResponse.make(["message": "Hello from the agent!"])
        }
        // A scan reads /proc: on the pool.
        routes.get("api/v0/listening-ports") { [ports] _, _ in
            do {
                return JSONResponse.make(ListeningPortsJSON(ports: try ports.current()))
            } catch {
                throw APIError(.internalServerError, "Could not scan for listening ports.", detail: "\(error)")
            }
        }
        routes.get("debug/manifest") { [manifest] _, _ in
            guard let current = manifest.currentManifest else {
                throw APIError(.internalServerError, "no manifest in-memory")
            }
            return JSONResponse.make(ManifestJSON(current))
        }
        routes.get("debug/logs") { [recentLogs] _, _ in
            let buffer = ByteBuffer(string: recentLogs.text())
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; charset=utf-8", .contentLength: String(buffer.readableBytes)],
                body: .init(byteBuffer: buffer))
        }
        for (method, path) in Self.containerRoutes {
            routes.on(method, path, executor: .eventLoop) { _, _ -> Response in
                throw APIError(
                    .forbidden, "Dev Container feature not enabled.",
                    detail: "To enable this feature, set CODER_AGENT_DEVCONTAINERS_ENABLE=true in your template.")
            }
        }
    }
}

/// `{"ports": [...]}`.
struct ListeningPortsJSON: Encodable {
    var ports: [ListeningPort]
}
