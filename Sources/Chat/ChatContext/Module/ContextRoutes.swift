import AgentCore
import AgentHTTP
import Hummingbird

/// The context routes, with the reference's shapes, statuses and texts:
/// `GET|POST /context/sources`, `GET|DELETE /context/sources/{path}` (the path
/// URL-escaped, `%2F` for `/`), `POST /context/resync` and the legacy `GET /context-config`.
struct ContextRoutes: Sendable {
    let manager: ContextManager

    /// On the pool (adding a source resolves paths on disk, a resync waits for the resolver),
    /// except the list of sources, copied from memory under the manager's lock.
    func add(to routes: inout AgentRoutes) {
        let manager = self.manager
        routes.get("context/sources", executor: .eventLoop) { _, _ in
            JSONResponse.make(manager.sources.map(ContextSourceJSON.init(path:)))
        }
        routes.post("context/sources") { request, context in
            let body = try await JSONRequest.decode(request, context: context, typeName: "agentcontext.AddSourceRequest")
            let raw = try body.string("path") ?? ""
            do throws(ContextManager.SourceError) {
                let path = try manager.addSource(raw)
                return JSONResponse.make(ContextSourceJSON(path: path), status: .created)
            } catch {
                throw APIError(.badRequest, "Could not add context source.", detail: Self.detail(error))
            }
        }
        routes.get("context/sources/:path") { _, context in
            do throws(ContextManager.SourceError) {
                let path = try manager.source(Self.pathParameter(context))
                return JSONResponse.make(ContextSourceJSON(path: path))
            } catch {
                if case .notFound(let path) = error {
                    throw APIError(.notFound, "Context source not found.", detail: "No source registered for path \(goQuote(path)).")
                }
                throw APIError(.badRequest, "Invalid context source path.", detail: Self.detail(error))
            }
        }
        routes.delete("context/sources/:path") { _, context in
            do throws(ContextManager.SourceError) {
                try manager.removeSource(Self.pathParameter(context))
                return Response(status: .noContent)
            } catch {
                if case .notFound = error { throw APIError(.notFound, "Context source not found.", detail: "source not found") }
                throw APIError(.badRequest, "Could not remove context source.", detail: Self.detail(error))
            }
        }
        routes.post("context/resync") { _, _ in
            do {
                return JSONResponse.make(ContextSnapshotJSON(try await manager.resync()))
            } catch is CancellationError {
                throw APIError(.gatewayTimeout, "Resync timed out.", detail: "context canceled")
            } catch {
                throw APIError(.internalServerError, "Resync failed.", detail: "\(error)")
            }
        }
        routes.get("context-config") { _, _ in
            let config = LegacyContextConfig(
                configuration: manager.configuration, home: manager.home, workingDirectory: manager.workingDirectory)
            return JSONResponse.make(config.response())
        }
    }

    /// The `{path}` parameter, percent-decoded.
    static func pathParameter(_ context: AgentRequestContext) -> String {
        let raw = context.parameters.get("path") ?? ""
        guard raw.contains("%") else { return raw }
        return raw.percentDecoded() ?? raw
    }

    static func detail(_ error: ContextManager.SourceError) -> String {
        switch error {
        case .invalid(let text): text
        case .notFound: "source not found"
        case .tooMany: "more than \(ContextManager.maxSources) context sources"
        }
    }
}
