import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// Answers every routed request: finds the route in the ``RouteTable``, runs its handler on
/// the route's executor, turns what it throws into the reference's JSON error body, and
/// records the request in `http.server.request.duration`.
///
/// Errors: unmatched routes become 404 `Route not found.`, a routed path with another
/// method 405 with `Allow` (as chi, the reference's router, answers), ``APIError``s answer
/// as they are, Hummingbird's own errors keep their status, and anything unexpected becomes
/// 500 without leaking internals. The request metrics and the error mapping are plain code
/// here rather than middleware layers around each route (measured with `agent-bench http`).
public struct AgentResponder: HTTPResponder {
    public typealias Context = AgentRequestContext

    let table: RouteTable

    public init(table: RouteTable) { self.table = table }

    /// Never throws: every error becomes its JSON answer here. Resolves the route and runs
    /// its handler on the route's executor (for callers that did neither; the connection
    /// core calls ``respond(to:context:route:)``).
    nonisolated(nonsending) public func respond(to request: Request, context: Context) async -> Response {
        let path = Substring(request.uri.path)
        let resolution = table.resolve(method: request.method, path: path)
        if case .route(let route, _, _) = resolution, route.executor == .pool {
            return await withTaskExecutorPreference(HandlerPoolExecutor.shared) { [context] in
                await respond(to: request, context: context, resolution: resolution, path: path)
            }
        }
        return await respond(to: request, context: context, resolution: resolution, path: path)
    }

    /// Answers `request` on the route its head resolved to, on the executor the caller
    /// already chose for it (the route's): no second lookup, no second hop.
    nonisolated(nonsending) func respond(to request: Request, context: Context, route: RouteInfo) async -> Response {
        guard let resolution = route.resolution else { return await respond(to: request, context: context) }
        return await respond(to: request, context: context, resolution: resolution, path: route.path)
    }

    nonisolated(nonsending) private func respond(
        to request: Request, context: Context, resolution: RouteTable.Resolution, path: Substring
    ) async -> Response {
        let start = NIODeadline.now().uptimeNanoseconds
        var timers = table.unroutedTimers
        var status: HTTPResponse.Status
        var response: Response
        do {
            switch resolution {
            case .route(let route, let endpoint, let captures):
                timers = endpoint.timers
                var context = context
                context.coreContext.parameters = RouteTable.handlerParameters(captures, of: path)
                context.coreContext.endpointPath.value = endpoint.label
                response = try await route.handler.respond(to: request, context: context)
            case .methodNotAllowed(let endpoint):
                timers = endpoint.timers
                context.coreContext.endpointPath.value = endpoint.label
                throw Self.methodNotAllowed(request, allow: endpoint.allow)
            case .notFound:
                response = try await table.notFound.respond(to: request, context: context)
            }
            status = response.status
        } catch {
            let answer = Self.answer(for: error, request: request, context: context)
            status = answer.status
            response = answer.response()
        }
        timers.record(method: request.method, status: status, nanoseconds: NIODeadline.now().uptimeNanoseconds &- start)
        return response
    }

    /// Answers `request` with `immediate`, the route's handler that answers at once (the
    /// connection calls it on its loop, without a task): the same parameters, errors and
    /// request metrics as ``respond(to:context:route:)``.
    func respondImmediately(
        to request: Request, context: Context, endpoint: RouteTable.Endpoint, captures: [RouteTrie<RouteTable.Endpoint>.Capture],
        path: Substring, immediate: AgentRoute.ImmediateHandler
    ) -> ImmediateResponse {
        let start = NIODeadline.now().uptimeNanoseconds
        var context = context
        context.coreContext.parameters = RouteTable.handlerParameters(captures, of: path)
        context.coreContext.endpointPath.value = endpoint.label
        let response: ImmediateResponse
        do {
            response = try immediate(request, context)
        } catch {
            response = Self.answer(for: error, request: request, context: context).immediateResponse()
        }
        endpoint.timers.record(method: request.method, status: response.status, nanoseconds: NIODeadline.now().uptimeNanoseconds &- start)
        return response
    }

    /// The JSON error a handler's error answers with, on a connection whose input may have
    /// broken.
    static func answer(for error: any Error, request: Request, context: Context) -> APIError {
        let answer = apiError(for: error, request: request, logger: context.logger)
        if let detail = context.connectionObserver?.malformedInput, isCutShort(answer) {
            // Broken framing (a chunk size of 18 hex digits) cancelled the request: the
            // client's mistake, as on a route that collects its body.
            return APIError(.badRequest, "Malformed HTTP request.", detail: detail)
        }
        return answer
    }

    /// An answer that only says the request was cut short (cancelled, its body ended early).
    static func isCutShort(_ answer: APIError) -> Bool {
        answer.status == .serviceUnavailable || answer.status == .badRequest || answer.status == .internalServerError
    }

    /// 405 for a method a routed path has no handler for, its `Allow` naming those it has.
    static func methodNotAllowed(_ request: Request, allow: String) -> APIError {
        var error = APIError(.methodNotAllowed, "Method not allowed.", detail: "\(request.method) \(request.uri.path); allowed: \(allow)")
        error.headers[.allow] = allow
        return error
    }

    /// The JSON error a thrown error answers with.
    static func apiError(for error: any Error, request: Request, logger: Logger) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as RequestBodyError:
            switch error {
            case .malformed(let detail): return APIError(.badRequest, "Malformed HTTP request.", detail: detail)
            case .incomplete: return .bodyIncomplete
            }
        case is NIOTooManyBytesError:
            // Any route that collects a body with a limit.
            return .bodyTooLarge
        case let error as HTTPError:
            switch error.status {
            case .notFound: return APIError(.notFound, "Route not found.", detail: "\(request.method) \(request.uri.path)")
            case .contentTooLarge: return .bodyTooLarge
            default: return APIError(error.status, error.body ?? error.status.reasonPhrase)
            }
        case is CancellationError:
            return APIError(.serviceUnavailable, "Request cancelled.")
        default:
            logger.error("unhandled route error", metadata: ["error": "\(error)", "path": "\(request.uri.path)"])
            return APIError(.internalServerError, "Internal error.")
        }
    }
}

/// Answers a path no route matches (the responder turns it into the JSON 404).
struct RouteNotFoundResponder: HTTPResponder {
    typealias Context = AgentRequestContext

    func respond(to request: Request, context: Context) async throws -> Response {
        // A connection's context is reused, so the previous request's route must not stay.
        context.coreContext.endpointPath.value = "NotFound"
        throw HTTPError(.notFound)
    }
}
