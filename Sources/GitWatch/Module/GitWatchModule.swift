import AgentCore
import AgentHTTP
import Hummingbird

/// The git watcher as a capability module, mounted at `/api/v0/git`: the watch socket over
/// the chat → paths store (libgit2 in process; the agent never forks git).
public struct GitWatchModule: HTTPModule {
    let socket: GitWatchSocket
    let sessions = WatchSessions()

    public var name: String { "git watch" }

    /// `timing` is the socket's clock (tests shorten it); `maxWatches` bounds the inotify
    /// watches of all repositories together.
    public init(context: AgentContext, timing: WatchTiming = .standard, maxWatches: Int = 8192) {
        socket = GitWatchSocket(
            chatPaths: context.chatPaths, sessions: sessions, watcher: TreeWatcher(maxWatches: maxWatches), timing: timing)
    }

    /// Closes the watch sockets with 1001 when shutdown reaches the `work` phase (before the
    /// HTTP listeners close at `serving`).
    public var services: [ModuleService] {
        [ModuleService("git watch sockets", sessions, stopsIn: .work)]
    }

    /// `show` reads a repository (pool); the watch socket.
    public func routes(_ routes: inout AgentRoutes) {
        let show = GitShowRoute()
        routes.get("show") { request, context in try await show.show(request, context) }
        routes.webSocket(socket.route())
    }
}
