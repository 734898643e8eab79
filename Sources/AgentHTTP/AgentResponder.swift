import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// Answers every routed request: finds the route (``AgentRouter``'s trie), runs its handler,
/// turns what it throws into the reference's JSON error body, and records the request in
/// `http.server.request.duration`.
///
/// Errors: unmatched routes become 404 `Route not found.`, ``APIError``s answer as they are,
/// Hummingbird's own errors keep their status, and anything unexpected becomes 500 without
/// leaking internals.
public struct AgentResponder: HTTPResponder {
    public typealias Context = AgentRequestContext

    let trie: RouterTrie<AgentEndpoint>
    /// The trie's rules in byte operations, when every route is literals and captures.
    let matcher: RouteMatcher?
    let notFound: any HTTPResponder<Context>
    /// Timers of requests no route matched.
    let unrouted: RequestTimers

    /// Never throws: every error becomes its JSON answer here.
    nonisolated(nonsending) public func respond(to request: Request, context: Context) async -> Response {
        let start = NIODeadline.now().uptimeNanoseconds
        var timers = unrouted
        var status: HTTPResponse.Status
        var response: Response
        do {
            if let (endpoint, parameters) = resolve(request.uri.path) {
                timers = endpoint.timers
                var context = context
                context.coreContext.parameters = parameters
                context.coreContext.endpointPath.value = endpoint.route
                // A known path with another method: 405 with `Allow`, as chi (the
                // reference's router) answers.
                guard let responder = endpoint.responder(for: request.method) else { throw endpoint.methodNotAllowed(request) }
                response = try await responder.respond(to: request, context: context)
            } else {
                response = try await notFound.respond(to: request, context: context)
            }
            status = response.status
        } catch {
            let answer = Self.apiError(for: error, request: request, logger: context.logger)
            status = answer.status
            response = answer.response()
        }
        timers.record(method: request.method, status: status, nanoseconds: NIODeadline.now().uptimeNanoseconds &- start)
        return response
    }

    /// The route of `path` and its parameters, or nil.
    private func resolve(_ path: String) -> (AgentEndpoint, Parameters)? {
        switch matcher?.resolve(path) ?? .askTheTrie {
        case .match(let endpoint, let parameters): return (endpoint, parameters)
        case .noMatch: return nil
        case .askTheTrie: return trie.resolve(path)
        }
    }

    /// The JSON error a thrown error answers with.
    static func apiError(for error: any Error, request: Request, logger: Logger) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as RequestBodyError:
            switch error {
            case .malformed(let detail): return APIError(.badRequest, "Malformed HTTP request.", detail: detail)
            case .incomplete: return APIError(.badRequest, "Request body incomplete.", detail: "The connection ended before the body did.")
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
