import AgentCore
import AgentProto
import AgentRPC
import AgentTestSupport
@testable import ChatContext
import ControlPlaneDouble
import Foundation
import Logging
import Synchronization
import Testing

/// The context manager and its push participant on a real upward session (WebSocket, yamux,
/// dRPC) to the control-plane double, which validates every push with coderd's limits and
/// keeps what it accepted: the readiness gate, sessions, files coming and going, hostile
/// trees, Unimplemented and a partial watch set.
@Suite(.timeLimit(.minutes(3)))
struct ContextPushScenarioTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    /// How long a wait may take on a loaded host (a passing wait returns at once).
    static let patience: Duration = .seconds(90)

    /// Runs `manager` and one control-plane session carrying its push for the body's length.
    func pushing(
        _ manager: ContextManager, to double: ControlPlaneDouble, _ body: @escaping @Sendable () async throws -> Void
    ) async throws {
        let managerTask = Task { try await manager.run() }
        defer { managerTask.cancel() }
        try await double.run { url in
            var configuration = ControlPlaneSession.Configuration(agentVersion: "0.1.0")
            configuration.shutdownDeadline = .seconds(30)
            let participant = ContextPushParticipant(
                manager: manager, redactor: { ContextRedactor() }, metrics: manager.metrics, logger: Self.quiet)
            let session = ControlPlaneSession(
                configuration: configuration,
                dialer: WebSocketDialer(baseURL: url, token: double.token, version: "2.10", logger: Self.quiet),
                logger: Self.quiet, participants: UpwardParticipants([participant]))
            let running = Task { try await session.run() }
            do {
                try await body()
            } catch {
                session.beginShutdown()
                _ = try? await running.value
                throw error
            }
            session.beginShutdown()
            try await running.value
        }
    }

    static func state(_ double: ControlPlaneDouble) -> ControlPlaneDouble.ContextState {
        double.contextState.withLock { $0 }
    }

    /// Every push the double saw passed coderd's validation.
    static func allValid(_ double: ControlPlaneDouble) -> Bool {
        let state = state(double)
        return state.rejections.isEmpty && state.pushes.allSatisfy { ControlPlaneDouble.contextPushProblem($0) == nil }
    }

    @Test func theFirstPushWaitsForTheStartPhaseAndEachSessionStartsInitial() async throws {
        let tree = try TempTree()
        let agents = try tree.write("project/AGENTS.md", "# Rules\n")
        let watch = StartPhaseWatch(forwardingTo: NoLifecycleReporter())
        let manager = ContextManager(
            configuration: .init(), home: tree.root, directory: tree.path("project"), manifest: ManifestStore(),
            gate: .afterStartPhase(watch))
        let double = ControlPlaneDouble()
        try await pushing(manager, to: double) {
            #expect(await eventually(timeout: Self.patience) { double.recorded.withLock { $0.connections } >= 1 })
            // The startup scripts run: a resync still answers version 0, and nothing is pushed.
            watch.report(.starting)
            let gated = try await manager.resync()
            #expect(gated.version == 0)
            #expect(Self.state(double).pushes.isEmpty)

            watch.report(.ready)
            #expect(await eventually(timeout: Self.patience) { !Self.state(double).pushes.isEmpty })
            let first = try #require(Self.state(double).pushes.first)
            #expect(first.initial && first.version >= 1)
            #expect(first.resources.contains { $0.source == agents && $0.status == .ok })

            // A new session (the control plane dropped the connection) starts with `initial` again.
            await double.dropConnections()
            #expect(await eventually(timeout: Self.patience) { Self.state(double).pushes.count >= 2 }, "\(Self.state(double).pushes.map(\.version))")
            let state = Self.state(double)
            #expect(double.recorded.withLock { $0.connections } >= 2)
            #expect(state.pushes[1].initial && state.pushes[1].version >= first.version)
            #expect(state.stored?.version == state.pushes[1].version)
            #expect(Self.allValid(double))
        }
    }

    @Test func aSkillAddedThenRemovedIsPushedThenGone() async throws {
        let tree = try TempTree()
        try tree.write("project/AGENTS.md", "# Rules\n")
        let manager = ContextManager(
            configuration: .init(), home: tree.root, directory: tree.path("project"), manifest: ManifestStore(), gate: .open)
        let double = ControlPlaneDouble()
        let skill = tree.path("project/.agents/skills/lint")
        try await pushing(manager, to: double) {
            #expect(await eventually(timeout: Self.patience) { Self.state(double).stored != nil })
            let first = try #require(Self.state(double).stored)
            #expect(!first.resources.contains { $0.source == skill })

            try tree.write("project/.agents/skills/lint/SKILL.md", TempTree.skill("lint"))
            #expect(
                await eventually(timeout: Self.patience) {
                    Self.state(double).stored?.resources.contains { $0.source == skill && $0.status == .ok && $0.skill.name == "lint" } == true
                }, "\(Self.state(double).stored?.resources.map(\.source) ?? [])")
            let added = try #require(Self.state(double).stored)
            #expect(added.version > first.version && !added.initial)

            try FileManager.default.removeItem(atPath: skill)
            #expect(
                await eventually(timeout: Self.patience) {
                    (Self.state(double).stored?.version ?? 0) > added.version
                })
            let removed = try #require(Self.state(double).stored)
            #expect(!removed.resources.contains { $0.source == skill }, "\(removed.resources.map(\.source))")
            #expect(removed.aggregateHash != added.aggregateHash)
            #expect(Self.allValid(double))
        }
    }

    /// Diagnostics far over coderd's 4096 bytes, from files: a skill whose front-matter name
    /// of 60 KiB does not match its directory, and an `.mcp.json` entry named with 60 KiB
    /// (files are read up to 64 KiB, so no file's diagnostic is longer). They are pushed cut,
    /// and every push passes coderd's validation.
    @Test func hugeDiagnosticsArePushedCut() async throws {
        let tree = try TempTree()
        let long = String(repeating: "x", count: 60 << 10)
        try tree.write("project/.claude/skills/named/SKILL.md", "---\nname: \(long)\ndescription: d\n---\n")
        try tree.write("project/.mcp.json", "{\"mcpServers\":{\"_\(long)\":{\"command\":\"x\"}}}")
        let manager = ContextManager(
            configuration: .init(), home: tree.root, directory: tree.path("project"), manifest: ManifestStore(), gate: .open)
        let double = ControlPlaneDouble()
        try await pushing(manager, to: double) {
            #expect(await eventually(timeout: Self.patience) { Self.state(double).stored != nil || !Self.state(double).rejections.isEmpty })
            let state = Self.state(double)
            #expect(state.rejections.isEmpty, "\(state.rejections.map { $0.prefix(200) })")
            let stored = try #require(state.stored)
            let named = try #require(stored.resources.first { $0.source == tree.path("project/.claude/skills/named") })
            let entry = try #require(stored.resources.first { $0.source.hasPrefix(tree.path("project/.mcp.json#")) })
            for row in [named, entry] {
                #expect(row.status == .invalid && row.error.utf8.count <= 4096 && row.error.hasSuffix("... [truncated]"), "\(row.error.prefix(100))")
            }
            #expect(named.error.hasPrefix("front-matter name \"xxx"))
            #expect(entry.source.utf8.count <= 1024)
            #expect(Self.allValid(double))
        }
    }

    /// 2000 skill directories (past the resolver's 1000 files and 500 counted resources): the
    /// push lists at most 1000 resources, at most 500 of them counted, says why, and passes
    /// coderd's validation.
    @Test(.ownThreads) func aTwoThousandSkillTreeStaysWithinCoderdsLimits() async throws {
        let tree = try TempTree()
        for index in 0..<2_000 {
            try tree.write("project/.agents/skills/s\(index)/SKILL.md", TempTree.skill("s\(index)"))
        }
        let manager = ContextManager(
            configuration: .init(), home: tree.root, directory: tree.path("project"), manifest: ManifestStore(), gate: .open)
        let double = ControlPlaneDouble()
        try await pushing(manager, to: double) {
            #expect(await eventually(timeout: Self.patience) { Self.state(double).stored != nil || !Self.state(double).rejections.isEmpty })
            let state = Self.state(double)
            #expect(state.rejections.isEmpty, "\(state.rejections.map { $0.prefix(200) })")
            let stored = try #require(state.stored)
            #expect(stored.resources.count == 1000)
            #expect(stored.resources.filter { $0.status == .ok }.count == 500)
            #expect(stored.resources.filter { $0.status == .excluded }.count == 500)
            #expect(stored.snapshotError == "more than 1000 context files found; the rest are not read")
            #expect(Self.allValid(double))
        }
    }

    /// Unimplemented ends the push for that session: a later change, resolved, is not offered
    /// on it; the next session tries once more.
    @Test func unimplementedStopsThePushForTheSession() async throws {
        let tree = try TempTree()
        let agents = try tree.write("project/AGENTS.md", "# Rules\n")
        let manager = ContextManager(
            configuration: .init(), home: tree.root, directory: tree.path("project"), manifest: ManifestStore(), gate: .open)
        let double = ControlPlaneDouble()
        double.contextState.withLock { $0.unimplemented = true }
        try await pushing(manager, to: double) {
            #expect(await eventually(timeout: Self.patience) { Self.state(double).unimplementedAnswers >= 1 })
            let before = manager.snapshot
            try tree.write("project/AGENTS.md", "# Rules, changed\n")
            #expect(
                await eventually(timeout: Self.patience) {
                    manager.snapshot.version > before.version
                        && manager.snapshot.resources.contains { $0.source == agents && $0.description == "Rules, changed" }
                })
            #expect(Self.state(double).unimplementedAnswers == 1)
            // A new session asks once more (and stops again); the first asked only once.
            await double.dropConnections()
            #expect(await eventually(timeout: Self.patience) { Self.state(double).unimplementedAnswers >= 2 })
            #expect(Self.state(double).unimplementedAnswers == 2)
            #expect(Self.state(double).pushes.isEmpty)
        }
    }

    /// A watch set the budget cuts (as when the kernel's inotify limit is reached) is said in
    /// the pushed `snapshot_error`.
    @Test func aPartialWatchSetIsPushedAsTheSnapshotError() async throws {
        let tree = try TempTree()
        try tree.write("project/.agents/skills/a/SKILL.md", TempTree.skill("a"))
        let manager = ContextManager(
            configuration: .init(), home: tree.root, directory: tree.path("project"), manifest: ManifestStore(), gate: .open,
            maxWatches: 2)
        let double = ControlPlaneDouble()
        try await pushing(manager, to: double) {
            #expect(await eventually(timeout: Self.patience) { Self.state(double).stored != nil })
            let stored = try #require(Self.state(double).stored)
            #expect(stored.snapshotError == "context watcher: more than 2 directories to watch; the rest are not watched")
            #expect(Self.allValid(double))
        }
    }
}

/// The resolver's walk over a hostile tree costs what its caps say, whatever the tree holds.
struct ContextWalkBoundTests {
    /// 12 000 entries in one skills container (past the 8192 a directory read is cut to here:
    /// the same code as the agent's 65 536, at a size a loaded test host makes quickly), and
    /// link loops in another: the snapshot says the directory was cut, the loop is a failed
    /// resource, and the watch set stops at its bound.
    @Test(.ownThreads) func aHugeDirectoryAndLinkLoopsAreBounded() throws {
        let tree = try TempTree()
        let crowded = tree.path("project/.agents/skills")
        try tree.mkdir("project/.agents/skills")
        // Every tenth entry a directory (a skill directory without its SKILL.md), the rest files.
        for index in 0..<12_000 {
            if index % 10 == 0 {
                try #require(mkdir(crowded + "/d\(index)", 0o755) == 0)
            } else {
                try TestFile.write(crowded + "/f\(index)", [UInt8]())
            }
        }
        try tree.mkdir("project/.claude/skills/looped")
        try tree.link("project/.claude/skills/looped/SKILL.md", to: "SKILL.md")
        try tree.link("project/.claude/skills/self", to: ".")
        try tree.write("project/.claude/skills/good/SKILL.md", TempTree.skill("good"))
        let roots = [ContextScanRoot(path: tree.path("project"))]
        var limits = ContextLimits()
        limits.directoryEntries = 8192
        let snapshot = ContextResolver(limits: limits).resolve(roots: roots)
        #expect(snapshot.snapshotError == "directory \"\(crowded)\" has more than 8192 entries; the rest are not read")
        let byID = Dictionary(uniqueKeysWithValues: snapshot.resources.map { ($0.id, $0) })
        let looped = try #require(byID["skill:" + tree.path("project/.claude/skills/looped")])
        #expect(looped.status == .unreadable && looped.error == "symlink resolve: EvalSymlinks: too many links")
        #expect(byID["skill:" + tree.path("project/.claude/skills/good")]?.status == .ok)
        #expect(!snapshot.resources.contains { $0.source.hasSuffix("/self") })
        #expect(snapshot.resources.count == 2)
        let watched = ContextWatchSet.directories(for: roots, fileSystem: PosixContextFileSystem(), limit: ContextWatcher.defaultMaxWatches + 1)
        #expect(watched.count == ContextWatcher.defaultMaxWatches + 1, "cut at the bound, not all 1200 directories")
    }
}
