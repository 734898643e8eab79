import AgentCore
import AgentTestSupport
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

@testable import MCPEngine

/// Reloads against hostile timing, with real files and raw stdio servers (plain Python, no
/// SDK, so each starts in milliseconds): a server that never answers delays no reload,
/// edits land while the directory churns, a same-size rewrite with its times restored is
/// seen, a watcher that cannot watch falls back to polling, and a half-saved or briefly
/// missing file keeps its servers.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct MCPConfigReloadTests {
    /// A raw stdio MCP server: `ok-*` answers everything, `hang-init` never answers,
    /// `hang-list` answers `initialize` but never `tools/list`.
    static let script = """
        import json, sys
        mode = sys.argv[1]
        for line in sys.stdin:
            msg = json.loads(line)
            if "id" not in msg or mode == "hang-init":
                continue
            method = msg.get("method")
            if method == "initialize":
                result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                          "serverInfo": {"name": "raw", "version": "1"}}
            elif method == "tools/list":
                if mode == "hang-list":
                    continue
                result = {"tools": [{"name": "echo", "description": "Echoes.", "inputSchema": {"type": "object"}}]}
            elif method == "tools/call":
                result = {"content": [{"type": "text", "text": mode}]}
            else:
                result = {}
            print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
        """

    /// A working directory with the raw server's script and an `.mcp.json`, an engine over
    /// it (timeouts long enough that a hung server stays hung for the whole test), its log.
    final class Engine: Sendable {
        let directory: String
        let catalog = MCPCatalog()
        let log = CapturedLog()
        let manager: MCPServerManager
        let task = Mutex<Task<Void, Never>?>(nil)
        var path: String { directory + "/.mcp.json" }

        init(configure: (inout MCPServerManager.Configuration) -> Void = { _ in }) throws {
            directory = NSTemporaryDirectory() + "mcp-reload-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try TestFile.write(directory + "/raw_server.py", Array(MCPConfigReloadTests.script.utf8))
            var configuration = MCPServerManager.Configuration(
                configFiles: [".mcp.json"], clientVersion: "test",
                timeouts: .init(connect: .seconds(600), list: .seconds(600), call: .seconds(60)),
                restart: MCPRestartPolicy(initial: .milliseconds(50), maximum: .milliseconds(400), stable: .seconds(60)),
                timing: .init(stdinGrace: .milliseconds(500), termGrace: .milliseconds(500)))
            configure(&configuration)
            manager = MCPServerManager(
                configuration: configuration, home: directory, directory: directory, environment: MCPTestServers.environment,
                manifest: ManifestStore(), gate: .open, catalog: catalog, logger: log.logger)
        }

        /// `{"mcpServers": {name: raw server in `mode`}}`.
        static func text(_ servers: [String: String]) -> String {
            let entries = servers.sorted { $0.key < $1.key }.map { name, mode in
                "\"\(name)\": {\"command\": \"python3\", \"args\": [\"raw_server.py\", \"\(mode)\"]}"
            }
            return "{\"mcpServers\": {\(entries.joined(separator: ", "))}}\n"
        }

        /// Written aside and renamed, as editors save.
        func write(_ text: String) throws {
            try TestFile.write(path, Array(text.utf8), atomically: true)
        }

        func write(servers: [String: String]) throws { try write(Self.text(servers)) }

        func start() {
            let manager = self.manager
            task.withLock { $0 = Task { try? await manager.run() } }
        }

        func stop() async {
            let running = task.withLock { $0 }
            running?.cancel()
            await running?.value
            try? FileManager.default.removeItem(atPath: directory)
        }

        func server(_ name: String) -> MCPServerStatus? { manager.servers.first { $0.name == name && $0.transport != "config" } }
        func entry(_ name: String) -> MCPCatalogEntry? { catalog.entries.first { $0.name == name } }
        /// The configuration file's own row, if any.
        var fileRow: MCPServerStatus? { manager.servers.first { $0.transport == "config" } }
    }

    /// Creates and deletes a file in `directory` every 50 ms on a thread of its own until
    /// stopped: what a build or a log rotation nearby does.
    final class Churn: Sendable {
        private let state = Mutex((stopped: false, rounds: 0))

        init(directory: String) {
            Thread.detachNewThread { [self] in
                var round = 0
                while !state.withLock({ $0.stopped }) {
                    let path = directory + "/churn-\(round % 4)"
                    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                    if fd >= 0 { close(fd) }
                    unlink(path)
                    round += 1
                    state.withLock { $0.rounds = round }
                    usleep(50_000)
                }
            }
        }

        var rounds: Int { state.withLock { $0.rounds } }
        func stop() { state.withLock { $0.stopped = true } }
    }

    // MARK: Item 9: a hung server delays nothing

    @Test(arguments: ["hang-init", "hang-list"])
    func aServerThatNeverAnswersDelaysNoReload(_ hang: String) async throws {
        let e = try Engine()
        try e.write(servers: ["stuck": hang])
        e.start()
        // Stuck in its handshake (or its first listing) for the whole test.
        if hang == "hang-init" {
            #expect(await eventually { e.server("stuck")?.state == .connecting })
        } else {
            // Its session is up (a pid, a protocol version), but it is not connected until listed.
            #expect(await eventually { e.server("stuck")?.pid != nil })
            let stuck = try #require(e.server("stuck"))
            #expect(stuck.state == .connecting && stuck.toolCount == 0 && stuck.protocolVersion != nil, "\(stuck)")
        }
        // A good server added meanwhile is served while the stuck one is still stuck.
        try e.write(servers: ["stuck": hang, "alpha": "ok-1"])
        #expect(await eventually { e.entry("alpha")?.connected == true })
        #expect(e.entry("stuck")?.connected != true)
        #expect(e.server("stuck")?.state == .connecting)
        let result = try await e.manager.callTool("alpha__echo", arguments: nil)
        #expect(result.content.first?.text == "ok-1")
        // An empty configuration applies at once, the stuck server's connect included.
        try e.write(servers: [:])
        #expect(await eventually { e.manager.servers.isEmpty && e.catalog.entries.isEmpty })
        await e.stop()
    }

    // MARK: Item 10: edits land under churn

    @Test func anEditLandsWhileTheDirectoryChurns() async throws {
        let e = try Engine()
        try e.write(servers: ["zero": "ok-0"])
        e.start()
        #expect(await eventually { e.entry("zero")?.connected == true })
        let churn = Churn(directory: e.directory)
        defer { churn.stop() }
        #expect(await eventually { churn.rounds >= 5 })
        try e.write(servers: ["zero": "ok-0", "alpha": "ok-1"])
        #expect(await eventually { e.entry("alpha")?.connected == true })
        let rounds = churn.rounds
        // The churn was still going: the edit did not wait for quiet.
        #expect(await eventually { churn.rounds > rounds })
        await e.stop()
    }

    // MARK: Item 11: a same-size rewrite with its times restored

    @Test func aSameSizeRewriteWithItsTimesRestoredIsSeen() async throws {
        let e = try Engine()
        try e.write(servers: ["alpha": "ok-1"])
        e.start()
        #expect(await eventually { e.entry("alpha")?.connected == true })
        var before = stat()
        #expect(stat(e.path, &before) == 0)
        // As `cp -p` over it does: rewritten in place, same size, times put back.
        let text = Array(Engine.text(["bravo": "ok-1"]).utf8)
        #expect(text.count == Int(before.st_size))
        try TestFile.write(e.path, text)
        var times = [before.st_atim, before.st_mtim]
        #expect(utimensat(AT_FDCWD, e.path, &times, 0) == 0)
        var after = stat()
        #expect(stat(e.path, &after) == 0)
        #expect(
            after.st_size == before.st_size && after.st_mtim.tv_sec == before.st_mtim.tv_sec
                && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec)
        #expect(await eventually { e.entry("bravo")?.connected == true && e.server("alpha") == nil })
        await e.stop()
    }

    // MARK: Item 12: inotify exhausted

    @Test(arguments: [DirectoryWatcher.Fault.addWatch(ENOSPC), .initialization(EMFILE)])
    func aWatcherThatCannotWatchFallsBackToPolling(_ fault: DirectoryWatcher.Fault) async throws {
        let e = try Engine {
            $0.watcherFault = fault
            $0.pollInterval = .milliseconds(200)
        }
        e.start()
        // Said in the servers' list (the file's own row) and in the log.
        #expect(await eventually { e.fileRow?.state == .polling })
        let row = try #require(e.fileRow)
        #expect(row.name == e.path)
        let why = fault == .addWatch(ENOSPC) ? "inotify watch limit exceeded (ENOSPC)" : "inotify init failed"
        #expect(row.lastError.contains(why) && row.lastError.contains("polled every"), "\(row.lastError)")
        #expect(e.log.contains("mcp config files are not watched"), "\(e.log.text)")
        // A file written later is loaded by the poll, and its edits too.
        try e.write(servers: ["alpha": "ok-1"])
        #expect(await eventually { e.entry("alpha")?.connected == true })
        try e.write(servers: ["bravo": "ok-2"])
        #expect(await eventually { e.entry("bravo")?.connected == true && e.server("alpha") == nil })
        await e.stop()
    }

    // MARK: Item 13: a half-saved or briefly missing file

    @Test func aHalfSavedFileKeepsTheLastGoodServersAndSaysWhere() async throws {
        let e = try Engine()
        try e.write(servers: ["alpha": "ok-1"])
        e.start()
        #expect(await eventually { e.entry("alpha")?.connected == true })
        let pid = try #require(e.server("alpha")?.pid)
        // An editor's intermediate save: the JSON ends on line 2.
        try e.write("{\"mcpServers\": {\n  \"alpha\": {\"command\": ")
        #expect(await eventually { e.fileRow?.state == .invalid })
        let row = try #require(e.fileRow)
        #expect(row.name == e.path)
        #expect(row.lastError.hasPrefix("line 2, column 24: "), "\(row.lastError)")
        #expect(row.lastError.contains("last good configuration"), "\(row.lastError)")
        #expect(e.server("alpha")?.pid == pid)
        #expect(e.entry("alpha")?.connected == true)
        // A file of the wrong shape is the same.
        try e.write("[1, 2]\n")
        #expect(await eventually { e.fileRow?.lastError.contains("cannot unmarshal array") == true })
        #expect(e.server("alpha")?.pid == pid)
        // Parsing again: the row goes, the new entries apply, the unchanged one kept its session.
        try e.write(servers: ["alpha": "ok-1", "bravo": "ok-2"])
        #expect(await eventually { e.entry("bravo")?.connected == true && e.fileRow == nil })
        #expect(e.server("alpha")?.pid == pid)
        await e.stop()
    }

    @Test func aFileMissingForAMomentKeepsItsServers() async throws {
        let e = try Engine { $0.missingGrace = .seconds(600) }
        try e.write(servers: ["alpha": "ok-1"])
        e.start()
        #expect(await eventually { e.entry("alpha")?.connected == true })
        let pid = try #require(e.server("alpha")?.pid)
        #expect(unlink(e.path) == 0)
        #expect(await eventually { e.fileRow?.state == .missing })
        #expect(e.server("alpha")?.pid == pid)
        #expect(e.entry("alpha")?.connected == true)
        try e.write(servers: ["alpha": "ok-1"])
        #expect(await eventually { e.fileRow == nil })
        #expect(e.server("alpha")?.pid == pid)
        await e.stop()
    }

    @Test func aFileStillMissingAfterTheGraceRemovesItsServers() async throws {
        let e = try Engine { $0.missingGrace = .milliseconds(300) }
        try e.write(servers: ["alpha": "ok-1"])
        e.start()
        #expect(await eventually { e.entry("alpha")?.connected == true })
        let pid = try #require(e.server("alpha")?.pid)
        #expect(unlink(e.path) == 0)
        #expect(await eventually { e.manager.servers.isEmpty && e.catalog.entries.isEmpty })
        #expect(await eventually { MCPTestServers.isGoneOrZombie(pid) })
        await e.stop()
    }

    @Test func syntaxErrorsAreLocated() {
        func locate(_ text: String) -> String? {
            MCPConfigSet.syntaxLocation(Array(text.utf8)).map { "\($0.line):\($0.column)" }
        }
        #expect(locate("{\"a\": [1, 2]}") == nil)
        #expect(locate("[1, 2]") == nil)
        #expect(locate("{\n  \"a\": [1,\n") == "3:1")
        #expect(locate("{\"a\": tru}") == "1:10")
        #expect(locate("{\"é\": 01}") == "1:8")
        #expect(locate("{\"a\": 1,}") == "1:9")
        #expect(locate("{\"a\": \"\\x\"}") == "1:9")
        #expect(locate("{} {}") == "1:4")
        #expect(locate("") == "1:1")
    }

    @Test func theFingerprintSeesAnInPlaceRewriteWithItsTimesRestored() async throws {
        let directory = NSTemporaryDirectory() + "mcp-print-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/.mcp.json"
        try TestFile.write(path, Array("{\"a\":1}".utf8))
        let first = try #require(MCPConfigSet.fingerprint(path))
        var before = stat()
        #expect(stat(path, &before) == 0)
        // File times come from the kernel's coarse clock: wait until it passed the first
        // write's, so that the rewrite's change time can differ.
        #expect(
            await eventually {
                var now = timespec()
                clock_gettime(CLOCK_REALTIME_COARSE, &now)
                return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec) > first.changedNanoseconds
            })
        try TestFile.write(path, Array("{\"b\":2}".utf8))
        var times = [before.st_atim, before.st_mtim]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        let second = try #require(MCPConfigSet.fingerprint(path))
        #expect(first.size == second.size && first.modifiedNanoseconds == second.modifiedNanoseconds)
        #expect(first != second)
        // Replaced by another file (a rename over it): another inode.
        try TestFile.write(path, Array("{\"c\":3}".utf8), atomically: true)
        #expect(MCPConfigSet.fingerprint(path)?.inode != first.inode)
    }
}
