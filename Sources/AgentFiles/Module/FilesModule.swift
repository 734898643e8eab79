import AgentCore
import AgentHTTP
import Hummingbird

/// The file API as a capability module, mounted at `/api/v0`: reads, line
/// windows, atomic streamed writes, listings, path resolution, directory creation and moves.
/// Writes record what a chat touched in the shared ``ChatPaths`` (for the git watcher).
public struct FilesModule: HTTPModule {
    let reads = ReadRoutes()
    let writes: WriteRoutes
    let directories: DirectoryRoutes
    let edits: EditRoutes
    /// Tool calls seen by this agent (at-most-once writes and edits).
    let ledger: ToolCallLedger

    public var name: String { "files" }

    /// - Parameter agentStartedAt: when the agent started: a tool call older than that (less
    ///   2 s) with no record may have run in a previous agent, and is refused.
    public init(context: AgentContext, agentStartedAt: ContinuousClock.Instant = .now) {
        self.init(context: context, agentStartedAt: agentStartedAt, listings: ListingCache())
    }

    /// As ``init(context:agentStartedAt:)`` with the listings kept for paging given (tests
    /// inject one with their own clock).
    init(context: AgentContext, agentStartedAt: ContinuousClock.Instant, listings: ListingCache) {
        ledger = ToolCallLedger(startedAt: agentStartedAt)
        writes = WriteRoutes(chatPaths: context.chatPaths)
        edits = EditRoutes(writes: writes)
        directories = DirectoryRoutes(homeDirectory: context.environment["HOME"] ?? "/", listings: listings)
    }

    /// Every handler touches the file system: all on the pool.
    public func routes(_ routes: inout AgentRoutes) {
        routes.add(middleware: ChatIdentityMiddleware())
        routes.get("read-file") { request, context in try await reads.readFile(request, context) }
        routes.get("read-file-lines") { request, context in try await reads.readFileLines(request, context) }
        let cancel = ToolCallCancel(ledger: ledger)
        routes.post("write-file/:id/cancel") { request, context in try await cancel.cancel(request, context) }
        routes.post("edit-files/:id/cancel") { request, context in try await cancel.cancel(request, context) }
        routes.post("create-directory") { request, context in try await writes.createDirectory(request, context) }
        routes.post("move-file") { request, context in try await writes.moveFile(request, context) }
        routes.post("list-directory") { request, context in try await directories.listDirectory(request, context) }
        routes.get("resolve-path") { request, context in try await directories.resolvePath(request, context) }
        // Writes and edits run at most once per tool call (after the routes above, so only
        // these two get the middleware).
        routes.add(middleware: ToolCallMiddleware(ledger: ledger))
        // The upload streams (no size cap, an idle deadline).
        routes.post("write-file", body: AgentRoute.streamedBody) { request, context in try await writes.writeFile(request, context) }
        routes.post("edit-files") { request, context in try await edits.editFiles(request, context) }
    }
}
