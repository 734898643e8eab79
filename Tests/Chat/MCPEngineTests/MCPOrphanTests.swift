import AgentCore
import AgentTestSupport
import Foundation
import Testing

@testable import MCPEngine

/// A stdio server that exits by itself leaves no process of its group behind: real servers
/// (`sh` scripts, and a raw Python MCP server) that start a background `sleep 300` in their
/// own group and then exit.
@Suite(.timeLimit(.minutes(2)))
struct MCPOrphanTests {
    /// A pid file in a fresh directory.
    static func pidFile() throws -> String {
        let directory = NSTemporaryDirectory() + "mcp-orphan-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory + "/child.pid"
    }

    static func start(_ script: String, timing: MCPStdioProcess.Timing = .init()) throws -> MCPStdioProcess {
        let command = try MCPStdioCommand.make(
            MCPServerConfig(name: "orphans", transport: "stdio", command: "/bin/sh", args: ["-c", script]),
            environment: MCPTestServers.environment, directory: "/tmp")
        return try MCPStdioProcess.start(command, timing: timing, stderrLine: { _ in }, events: { _ in })
    }

    /// The pid the script wrote, once it is there (bounded wait).
    static func childPid(_ file: String) async throws -> pid_t {
        var pid: pid_t?
        _ = await eventually(timeout: .seconds(30)) {
            pid = (try? String(contentsOfFile: file, encoding: .utf8)).flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            return pid != nil
        }
        return try #require(pid, "the server wrote no child pid")
    }

    /// Whether `pid` is a live member of process group `group` (not a reused pid).
    static func isLiveMember(_ pid: pid_t, of group: pid_t) -> Bool {
        guard let stat = ProcStat.read(pid) else { return false }
        return stat.group == group && !stat.isDead
    }

    /// Cleans up after a failed run: the child, only while it is still in that group.
    static func cleanUp(_ pid: pid_t, group: pid_t) {
        if isLiveMember(pid, of: group) { kill(pid, SIGKILL) }
    }

    @Test func serverExitingByItselfTakesItsGroupWithIt() async throws {
        let file = try Self.pidFile()
        let process = try Self.start("sleep 300 </dev/null >/dev/null 2>&1 & echo $! > '\(file)'; exit 0")
        await process.waitFinished()
        let child = try await Self.childPid(file)
        defer { Self.cleanUp(child, group: process.pid) }
        #expect(!Self.isLiveMember(child, of: process.pid), "the server's background child outlived it")
    }

    @Test func serverExitingOnStdinEOFTakesItsGroupWithIt() async throws {
        let file = try Self.pidFile()
        let process = try Self.start("sleep 300 </dev/null >/dev/null 2>&1 & echo $! > '\(file)'; cat >/dev/null; exit 0")
        let child = try await Self.childPid(file)
        defer { Self.cleanUp(child, group: process.pid) }
        #expect(Self.isLiveMember(child, of: process.pid))
        await process.close()
        #expect(!Self.isLiveMember(child, of: process.pid), "the server's background child outlived its removal")
    }

    @Test func memberIgnoringSIGTERMIsKilled() async throws {
        let file = try Self.pidFile()
        let script = "(trap '' TERM; exec sleep 300) </dev/null >/dev/null 2>&1 & echo $! > '\(file)'; exit 0"
        let process = try Self.start(script, timing: .init(stdinGrace: .milliseconds(200), termGrace: .milliseconds(200)))
        await process.waitFinished()
        let child = try await Self.childPid(file)
        defer { Self.cleanUp(child, group: process.pid) }
        #expect(!Self.isLiveMember(child, of: process.pid), "a member that ignores SIGTERM outlived the server")
    }

    /// A process that left the server's group (a session of its own) is not the agent's to
    /// stop. The child writes its pid only once in its new session, and the server exits only
    /// after that, so the child has surely left when the group is swept.
    @Test func processThatLeftTheGroupIsLeftAlone() async throws {
        let file = try Self.pidFile()
        let script = """
            setsid sh -c 'echo $$ > "$0.tmp" && mv "$0.tmp" "$0" && exec sleep 300' '\(file)' </dev/null >/dev/null 2>&1 &
            while [ ! -s '\(file)' ]; do sleep 0.01; done
            exit 0
            """
        let process = try Self.start(script)
        await process.waitFinished()
        let child = try await Self.childPid(file)
        let stat = try #require(ProcStat.read(child), "the child is gone")
        let (state, group) = (stat.state, stat.group)
        defer { if group == child { kill(-child, SIGKILL) } }
        #expect(group == child && group != process.pid, "the child did not leave the server's group")
        #expect(state != UInt8(ascii: "Z"), "a process outside the server's group was signalled")
    }

    /// Through a session: a raw MCP server that answers `initialize`, starts a background
    /// child and exits once initialized.
    @Test func mcpServerExitingAfterInitializeLeavesNoChild() async throws {
        let file = try Self.pidFile()
        let script = """
            import json, subprocess, sys
            request = json.loads(sys.stdin.readline())
            child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            open(sys.argv[1], "w").write(str(child.pid))
            print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {
                "protocolVersion": request["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "orphans", "version": "1"}}}), flush=True)
            sys.stdin.readline()
            """
        let command = try MCPStdioCommand.make(
            MCPServerConfig(name: "orphans", transport: "stdio", command: "python3", args: ["-c", script, file]),
            environment: MCPTestServers.environment, directory: "/tmp")
        let owner = MCPStdioOwner()
        let session = try await MCPClientSession.connect(command, clientVersion: "test", owner: owner) { _, _ in }
        let child = try await Self.childPid(file)
        let group = session.pid
        defer { Self.cleanUp(child, group: group) }
        // The server is reaped (it leaves its owner) only after its group was swept.
        let reaped = await eventually(timeout: .seconds(30)) { owner.count == 0 }
        #expect(reaped, "the server did not exit")
        #expect(!Self.isLiveMember(child, of: group), "the server's child outlived it")
        await session.close()
    }
}
