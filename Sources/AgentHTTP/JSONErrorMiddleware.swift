import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// Turns every error a route (or the router) throws into the reference's JSON error body.
///
/// Unmatched routes become 404 `Route not found.`, Hummingbird's own errors keep their
/// status, and anything unexpected becomes 500 without leaking internals.
public struct JSONErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    public init() {}

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            throw error
        } catch is NIOTooManyBytesError {
            // Any route that collects a body with a limit.
            throw APIError.bodyTooLarge
        } catch let error as HTTPError {
            switch error.status {
            case .notFound:
                throw APIError(.notFound, "Route not found.", detail: "\(request.method) \(request.uri.path)")
            case .contentTooLarge:
                throw APIError.bodyTooLarge
            default:
                throw APIError(error.status, error.body ?? error.status.reasonPhrase)
            }
        } catch is CancellationError {
            throw APIError(.serviceUnavailable, "Request cancelled.")
        } catch {
            context.logger.error("unhandled route error", metadata: ["error": "\(error)", "path": "\(request.uri.path)"])
            throw APIError(.internalServerError, "Internal error.")
        }
    }
}
