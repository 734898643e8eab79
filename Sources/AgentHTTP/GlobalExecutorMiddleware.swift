import Hummingbird

/// Runs the routes it wraps on Swift's global executor instead of their connection's event
/// loop (see ``EventLoopTaskExecutor``). For handlers, and the default actors they call,
/// that may hold a thread: waiting on a lock a device thread keeps through a blocking read,
/// copying megabytes, synchronous file-system calls. On an event loop they would stall
/// every connection of that loop; here they cost the two thread hops the loop saves.
public struct GlobalExecutorMiddleware<Context: RequestContext>: RouterMiddleware {
    public init() {}

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        try await withTaskExecutorPreference(globalConcurrentExecutor) { try await next(request, context) }
    }
}
