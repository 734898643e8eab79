import AgentCore
import AgentTestSupport
@testable import ChatContext
import Foundation
import ServiceLifecycle
import Testing

/// The context manager over real files: the gate, the version counter, and the inotify
/// watcher's debounced resolves.
@Suite(.timeLimit(.minutes(3)))
struct ContextManagerTests {
    /// Runs `manager` for the body's length.
    func running(_ manager: ContextManager, _ body: () async throws -> Void) async throws {
        let task = Task { try await manager.run() }
        defer { task.cancel() }
        try await body()
    }

    @Test func gatedUntilTheStartPhaseEnds() async throws {
        let tree = try TempTree()
        try tree.write("project/AGENTS.md", "# Rules\n")
        let watch = StartPhaseWatch(forwardingTo: NoLifecycleReporter())
        let manager = ContextManager(
            configuration: .init(), home: tree.root, directory: tree.path("project"), manifest: ManifestStore(),
            gate: .afterStartPhase(watch))
        try await running(manager) {
            manager.trigger()
            // Before the gate: version 0 and empty, resync included.
            let early = try await manager.resync()
            #expect(early.version == 0 && early.resources.isEmpty)
            #expect(manager.snapshot.version == 0)
            watch.report(.starting)
            #expect(!watch.hasEnded)
            watch.report(.startError)
            #expect(await eventually { manager.snapshot.version >= 1 })
            #expect(manager.snapshot.resources.contains { $0.id == "instruction_file:" + tree.path("project/AGENTS.md") })
            let resynced = try await manager.resync()
            #expect(resynced.version > 1)
        }
    }

    @Test func anEditIsANewVersionWithoutAResync() async throws {
        let tree = try TempTree()
        let agents = try tree.write("project/AGENTS.md", "# Rules\n")
        let manager = ContextManager(
            configuration: .init(), home: tree.root, directory: tree.path("project"), manifest: ManifestStore(), gate: .open)
        try await running(manager) {
            #expect(await eventually { manager.snapshot.version >= 1 })
            let before = manager.snapshot
            try tree.write("project/AGENTS.md", "# Rules, edited\n")
            #expect(await eventually { manager.snapshot.version > before.version })
            let after = manager.snapshot.resources.first { $0.source == agents }
            #expect(after?.description == "Rules, edited")
            // A skill added in a container that did not exist at the first resolve.
            let version = manager.snapshot.version
            try tree.write("project/.agents/skills/lint/SKILL.md", "---\nname: lint\ndescription: Lints\n---\nbody\n")
            #expect(await eventually { manager.snapshot.version > version && manager.snapshot.resources.contains { $0.kind == .skill && $0.name == "lint" } })
        }
    }

    @Test func aWatchBudgetTooSmallIsASnapshotError() async throws {
        let tree = try TempTree()
        try tree.write("project/.agents/skills/a/SKILL.md", "---\nname: a\n---\n")
        let manager = ContextManager(
            configuration: .init(), home: tree.root, directory: tree.path("project"), manifest: ManifestStore(), gate: .open,
            maxWatches: 1)
        try await running(manager) {
            #expect(await eventually { manager.snapshot.version >= 1 })
            #expect(manager.snapshot.snapshotError == "context watcher: more than 1 directories to watch; the rest are not watched")
        }
    }

    @Test func theDebounceIsTrailing() {
        let start = ContinuousClock.now
        var debounce = TrailingDebounce()
        #expect(debounce.pollTimeout(at: start) == -1)
        debounce.event(at: start)
        let fired1 = debounce.fire(at: start + .milliseconds(249))
        #expect(!fired1)
        // Each event restarts the quiet time.
        debounce.event(at: start + .milliseconds(200))
        let fired2 = debounce.fire(at: start + .milliseconds(300))
        #expect(!fired2)
        #expect(debounce.pollTimeout(at: start + .milliseconds(300)) == 150)
        let fired3 = debounce.fire(at: start + .milliseconds(450))
        #expect(fired3)
        // Consumed: nothing more is due.
        let fired4 = debounce.fire(at: start + .seconds(5))
        #expect(!fired4)
    }

    @Test func relevantEvents() {
        #expect(ContextWatcher.isRelevant(mask: UInt32(IN_MODIFY), name: "AGENTS.md"))
        #expect(ContextWatcher.isRelevant(mask: UInt32(IN_CREATE), name: "anything"))
        #expect(!ContextWatcher.isRelevant(mask: UInt32(IN_MODIFY), name: "notes.txt"))
    }
}

/// A manifest's directory becomes the working directory: its seeds replace the earlier
/// ones, and a source the user added stays.
@Suite(.timeLimit(.minutes(3)))
struct ContextManagerSeedTests {
    @Test func aManifestReseeds() async throws {
        let tree = try TempTree()
        try tree.write("first/AGENTS.md", "one\n")
        try tree.write("second/AGENTS.md", "two\n")
        try tree.write("mine/CLAUDE.md", "mine\n")
        let store = ManifestStore()
        let manager = ContextManager(
            configuration: .init(), home: tree.root, directory: tree.path("first"), manifest: store, gate: .open)
        #expect(manager.sources == [tree.path(".coder"), tree.path(".coder/skills"), tree.path("first/.agents/skills"), tree.path("first/.mcp.json")])
        let task = Task { try await manager.run() }
        defer { task.cancel() }
        #expect(await eventually { manager.snapshot.version >= 1 })
        try manager.addSource(tree.path("mine"))
        store.publish(AgentManifest(directory: tree.path("second"), environment: [:]))
        #expect(await eventually { manager.workingDirectory == tree.path("second") })
        #expect(manager.sources == [tree.path(".coder"), tree.path(".coder/skills"), tree.path("mine"), tree.path("second/.agents/skills"), tree.path("second/.mcp.json")])
        let resynced = try await manager.resync()
        #expect(resynced.resources.contains { $0.source == tree.path("second/AGENTS.md") })
        #expect(!resynced.resources.contains { $0.source == tree.path("first/AGENTS.md") })
    }
}
