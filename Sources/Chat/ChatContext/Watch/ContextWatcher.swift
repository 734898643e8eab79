import AgentCore

/// The context's directory watcher: AgentCore's ``DirectoryWatcher`` with the context's
/// notion of a relevant event.
public typealias ContextWatcher = DirectoryWatcher

extension DirectoryWatcher {
    /// Files whose every event asks for a new resolve.
    static let contextNames: Set<String> = ["AGENTS.md", "CLAUDE.md", ".cursorrules", ".mcp.json", "SKILL.md"]

    /// Whether one event asks for a new resolve: any event on a file named `AGENTS.md`,
    /// `CLAUDE.md`, `.cursorrules`, `.mcp.json` or `SKILL.md`, any create, delete or move, a
    /// watched directory going away, and a queue overflow.
    static func isRelevant(mask: UInt32, name: String) -> Bool {
        mask & structural != 0 || contextNames.contains(name)
    }

    /// The context's watcher, calling `onChange` after each quiet burst.
    static func context(maxWatches: Int, onChange: @escaping @Sendable () -> Void) -> DirectoryWatcher {
        DirectoryWatcher(name: "context watcher", maxWatches: maxWatches, isRelevant: { isRelevant(mask: $0, name: $1) }, onChange: onChange)
    }
}
