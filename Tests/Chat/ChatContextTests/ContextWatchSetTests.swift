import AgentCore
import AgentTestSupport
@testable import ChatContext
import Foundation
import Testing

/// The watch set follows links as the resolver does: what a resolve reads through a link
/// (a linked skills container, a linked working directory) is watched at its target.
@Suite(.timeLimit(.minutes(3)))
struct ContextWatchSetTests {
    static func watched(_ roots: [ContextScanRoot]) -> [String] {
        ContextWatchSet.directories(for: roots, fileSystem: PosixContextFileSystem(), limit: ContextWatcher.defaultMaxWatches + 1)
    }

    @Test func aLinkedSkillsContainerIsWatchedAtItsTarget() throws {
        let tree = try TempTree()
        try tree.mkdir("project")
        try tree.write("shared/skills/foo/SKILL.md", TempTree.skill("foo"))
        try tree.link("project/.claude/skills", to: "../../shared/skills")
        let roots = [ContextScanRoot(path: tree.path("project"))]
        // The resolver reads the skill through the link.
        let snapshot = ContextResolver().resolve(roots: roots)
        #expect(snapshot.resources.first { $0.id == "skill:" + tree.path("project/.claude/skills/foo") }?.status == .ok, "\(snapshot.resources)")
        // So the container's target and its skill directory are watched.
        let watched = Self.watched(roots)
        #expect(watched.contains(tree.path("shared/skills")) && watched.contains(tree.path("shared/skills/foo")), "\(watched)")
    }

    @Test func aLinkedWorkingDirectoryIsWatchedAtItsTarget() throws {
        let tree = try TempTree()
        try tree.write("project/AGENTS.md", "# Rules\n")
        try tree.write("project/.agents/skills/lint/SKILL.md", TempTree.skill("lint"))
        try tree.link("workdir", to: "project")
        let watched = Self.watched([ContextScanRoot(path: tree.path("workdir"))])
        #expect(watched == [tree.path("project"), tree.path("project/.agents/skills"), tree.path("project/.agents/skills/lint")])
    }

    @Test func linkLoopsAndAliasesCostEachDirectoryOnce() throws {
        let tree = try TempTree()
        try tree.write("project/.agents/skills/a/SKILL.md", TempTree.skill("a"))
        // Two containers that are the same directory, one that is the root, and a loop.
        try tree.link("project/.claude/skills", to: "../.agents/skills")
        try tree.link("project/.codex/skills", to: "..")
        try tree.link("project/skills", to: "skills")
        let watched = Self.watched([ContextScanRoot(path: tree.path("project")), ContextScanRoot(path: tree.path("project/.claude/skills"))])
        #expect(Set(watched).count == watched.count, "\(watched)")
        #expect(watched.contains(tree.path("project/.agents/skills/a")) && watched.contains(tree.path("project/.codex")))
        #expect(!watched.contains { $0.hasSuffix("/skills/skills") || $0.contains("/.claude/") }, "\(watched)")
    }

    /// End to end: an `AGENTS.md` edit in a working directory reached through a link is a new
    /// version (before, the link's parent was watched and the edit went unseen).
    @Test func anEditInALinkedWorkingDirectoryIsANewVersion() async throws {
        let tree = try TempTree()
        try tree.write("project/AGENTS.md", "# Rules\n")
        try tree.link("workdir", to: "project")
        let manager = ContextManager(
            configuration: .init(), home: tree.root, directory: tree.path("workdir"), manifest: ManifestStore(), gate: .open)
        let task = Task { try await manager.run() }
        defer { task.cancel() }
        #expect(await eventually { manager.snapshot.version >= 1 })
        let before = manager.snapshot.version
        try tree.write("project/AGENTS.md", "# Rules, edited\n")
        #expect(await eventually { manager.snapshot.version > before })
        #expect(manager.snapshot.resources.first { $0.kind == .instructionFile }?.description == "Rules, edited")
    }
}
