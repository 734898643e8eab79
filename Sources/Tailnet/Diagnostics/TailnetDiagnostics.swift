import AgentCore
import AgentHTTP
import Hummingbird
import Synchronization

/// The tailnet's routes outside its own mount, where the reference serves them (mounted at
/// the API's root): `GET /api/v0/netcheck` (what `coder ping` shows) and the
/// `/debug/magicsock` page a support bundle collects.
public struct TailnetDiagnostics: HTTPModule {
    let runtime: TailnetRuntime?

    public var name: String { "tailnet diagnostics" }

    /// On the pool: the interface report reads the system, the page the engine's tables.
    public func routes(_ routes: inout AgentRoutes) {
        let runtime = self.runtime
        routes.get("api/v0/netcheck") { _, _ in
            let status = TailnetModule.status(runtime)
            let home = status.homeRegion
            let connected = status.relays?.contains { $0.region == home && $0.state == "connected" } ?? false
            return JSONResponse.make(
                NetcheckReport(
                    homeRegion: status.enabled ? (home ?? 0) : nil, homeConnected: connected,
                    report: runtime?.current?.directStatus().report, interfaces: NetcheckReport.hostInterfaces()))
        }
        routes.get("debug/magicsock") { _, _ in
            guard let runtime else {
                // Standalone (no control plane) or --tailnet off: there will never be one.
                throw APIError(
                    .notFound, "There is no tailnet.",
                    detail: "The agent runs without a control plane (no --agent-url) or with the tailnet disabled, so it has no tailnet.")
            }
            guard runtime.current != nil else { throw APIError(.internalServerError, "network is not ready yet") }
            let buffer = ByteBuffer(string: MagicsockPage.html(TailnetModule.status(runtime), debugLogging: runtime.debugLogging.withLock { $0 }))
            return Response(
                status: .ok, headers: [.contentType: "text/html; charset=utf-8", .contentLength: String(buffer.readableBytes)],
                body: .init(byteBuffer: buffer))
        }
        routes.get("debug/magicsock/debug-logging/:state", executor: .eventLoop) { _, context in
            let raw = context.parameters.get("state") ?? ""
            guard let state = MagicsockPage.goBool(raw) else {
                throw APIError(.badRequest, "invalid state \(goQuote(raw)), must be a boolean")
            }
            runtime?.debugLogging.withLock { $0 = state }
            let buffer = ByteBuffer(string: "updated magicsock debug logging to \(state)")
            return Response(
                status: .ok, headers: [.contentType: "text/plain; charset=utf-8", .contentLength: String(buffer.readableBytes)],
                body: .init(byteBuffer: buffer))
        }
    }
}

extension TailnetModule {
    /// The routes the reference serves at the API's root (mount at `/`).
    public var diagnostics: TailnetDiagnostics { TailnetDiagnostics(runtime: runtime) }
}
