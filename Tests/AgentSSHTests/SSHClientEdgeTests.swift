@testable import AgentSSH
import AgentTestSupport
import Foundation
import Testing

/// How clients reach the server besides a plain `ssh host`: through a `ProxyCommand` that
/// copies raw bytes (what `coder ssh --stdio` does for `coder config-ssh`), and a client
/// killed in the middle of an upload.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SSHClientEdgeTests {
    static let options = [
        "-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
        "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=60",
    ]

    /// A byte copier between stdio and a TCP port, as `coder ssh --stdio` is between stdio
    /// and tailnet port 1: no SSH parsing on the way.
    static let stdioProxy = """
        import os, socket, sys, threading
        s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
        def up():
            while True:
                data = os.read(0, 65536)
                if not data: break
                s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        threading.Thread(target=up, daemon=True).start()
        while True:
            data = s.recv(65536)
            if not data: break
            os.write(1, data)
        """

    @Test func aProxyCommandCarriesTheSessionAsRawBytes() async throws {
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let script = NSTemporaryDirectory() + "ssh-proxy-\(UUID().uuidString.prefix(8)).py"
        try TestFile.write(script, Self.stdioProxy, atomically: true)
        defer { unlink(script) }
        let outcome = await ChildProgram.run(
            ["ssh"] + Self.options + [
                "-o", "ProxyCommand=python3 \(script) %h %p", "-p", "\(server.port)", "127.0.0.1",
                "echo via the proxy; exit 3",
            ],
            stderrToStdout: false)
        #expect(outcome.status == 3 && outcome.stdout == "via the proxy\n", "\(outcome)")
    }

    /// A client killed while it uploads: the session's process is hung up, the session
    /// leaves the registry, and the server goes on serving.
    @Test func aClientKilledMidUploadLeavesNothingBehind() async throws {
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let directory = NSTemporaryDirectory() + "ssh-vanish-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let client = try #require(
            ChildProgram.start(
                ["ssh"] + Self.options + ["-p", "\(server.port)", "127.0.0.1", "echo $$ > \(directory)/pid; exec cat > \(directory)/upload"]))
        // Upload until the file holds data (bounded: at most 64 MiB in 1 MiB writes, and a
        // write the client never takes, its window never reopened, fails once the client is
        // sent SIGKILL at 120 s: signalled only, its descriptors stay ours until it is reaped).
        let pidToBound = client.pid
        let bound = Task {
            try await Task.sleep(for: .seconds(120))
            kill(pidToBound, SIGKILL)
        }
        let stdin = client.stdin
        let arrived = await onThread { () -> Bool in
            let chunk = [UInt8](repeating: 0x61, count: 1 << 20)
            for _ in 0..<64 {
                guard chunk.withUnsafeBytes({ write(stdin, $0.baseAddress, $0.count) }) == chunk.count else { return false }
                var status = stat()
                if stat(directory + "/upload", &status) == 0, status.st_size > 0 { return true }
            }
            return false
        }
        // Ended before the client can be reaped below, so that no signal goes to a pid reused.
        bound.cancel()
        _ = await bound.result
        #expect(arrived, "the upload never reached the workspace")
        let pid = try #require(
            Int32(
                try String(contentsOfFile: directory + "/pid", encoding: .utf8)
                    .trimmingCharacters(in: .whitespacesAndNewlines)))
        await onThread { client.kill() }
        #expect(await eventually(timeout: .seconds(60)) { kill(pid, 0) != 0 }, "the upload's process outlived its client")
        #expect(await eventually(timeout: .seconds(60)) { server.server.sessions.count == 0 })
        let next = await server.ssh("echo still serving")
        #expect(next.status == 0 && next.stdout == "still serving\n", "\(next)")
    }
}
