import AgentCore
import HTTPTypes
import Hummingbird

/// Parses `Coder-Chat-Id` / `Coder-Ancestor-Chat-Ids` once into ``AgentRequestContext/chat``.
///
/// A header that is present but not a UUID is answered 400 `Invalid Coder-Chat-Id header.`
/// from here (the reference silently turns isolation off instead). Capability modules add
/// it to their route group and read `context.chat`.
public struct ChatIdentityMiddleware: RouterMiddleware {
    public typealias Context = AgentRequestContext

    public init() {}

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.chat = try Self.chat(request.headers)
        return try await next(request, context)
    }

    /// The chat of a request's headers, or the 400 for a malformed one (also used by
    /// WebSocket admission checks, which run before any middleware).
    public static func chat(_ headers: HTTPFields) throws(APIError) -> ChatIdentity? {
        do {
            return try ChatIdentity.from(headers)
        } catch {
            throw APIError(.badRequest, "Invalid Coder-Chat-Id header.", detail: "\(goQuote(error.value)) is not a UUID.")
        }
    }
}
