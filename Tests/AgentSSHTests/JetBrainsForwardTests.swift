import AgentCore
import AgentTestSupport
@testable import AgentSSH
import Foundation
import Synchronization
import Testing

/// JetBrains Gateway's `ssh -L` to its IDE backend: counted as a JetBrains session and
/// reported upward while open, found by the command line of the process owning the port.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct JetBrainsForwardTests {
    /// An echo server on loopback whose command line carries `marker` (none: a plain one).
    static func echoServer(marker: String?) async throws -> (ChildProgram.Running, Int) {
        let script = """
            import socket, sys, threading
            s = socket.socket()
            s.bind(('127.0.0.1', 0))
            s.listen()
            print(s.getsockname()[1], flush=True)
            def echo(c):
                while True:
                    data = c.recv(100)
                    if not data:
                        break
                    c.sendall(data)
                c.close()
            def serve():
                while True:
                    c, _ = s.accept()
                    threading.Thread(target=echo, args=(c,), daemon=True).start()
            threading.Thread(target=serve, daemon=True).start()
            sys.stdin.read()
            """
        let child = try #require(ChildProgram.start(["/usr/bin/python3", "-c", script] + (marker.map { [$0] } ?? [])))
        let line = await readLine(child)
        return (child, try #require(Int(line), "child said \(line)"))
    }

    /// A line of the child's output, read on a thread of its own; "" if the child says
    /// nothing for 60 s.
    static func readLine(_ child: ChildProgram.Running) async -> String {
        await onThread { child.readLine(limit: 4096, timeout: .seconds(60)) }
    }

    @Test func theReferencesMarkersAreFoundCaseInsensitively() {
        func line(_ args: String...) -> [UInt8] { args.flatMap { Array($0.utf8) + [0] } }
        #expect(JetBrainsForward.isJetBrains(commandLine: line("java", "-cp", "x.jar", "-Didea.vendor.name=JetBrains", "Main")))
        #expect(JetBrainsForward.isJetBrains(commandLine: line("/opt/toolbox", "COM.JETBRAINS.TOOLBOX")))
        #expect(JetBrainsForward.isJetBrains(commandLine: line("/idea/bin/remote-dev-server.sh", "run")))
        #expect(!JetBrainsForward.isJetBrains(commandLine: line("python3", "-m", "http.server")))
        #expect(!JetBrainsForward.isJetBrains(commandLine: line("idea.vendor.name", "JetBrains")))
    }

    @Test func socketsInAnyStateAreRead() {
        let table = """
              sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
               0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
               1: 0100007F:1F90 0100007F:A2C4 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1
               2: 0100007F:1F91 0100007F:A2C5 06 00000000:00000000 00:00000000 00000000     0        0 0 1
               3: garbage
            """
        #expect(
            ProcNetTCP.sockets(Array(table.utf8)) == [
                ProcNetTCP.Socket(port: 8080, state: 0x0A, inode: 4242), ProcNetTCP.Socket(port: 8080, state: 0x01, inode: 4343),
                ProcNetTCP.Socket(port: 8081, state: 0x06, inode: 0),
            ])
        #expect(ProcSocketOwners.socketInode(link: Array("socket:[4242]".utf8)) == 4242)
        #expect(ProcSocketOwners.socketInode(link: Array("pipe:[4242]".utf8)) == nil)
    }

    /// A real JetBrains-marked listener reached with `ssh -L`: counted and reported while the
    /// forward is open, back to 0 with DISCONNECT(0, normal close) after.
    @Test func aForwardToAJetBrainsProcessIsCountedAndReported() async throws {
        let (ide, idePort) = try await Self.echoServer(marker: "-Didea.vendor.name=JetBrains")
        defer { ide.kill() }
        let reports = ReportRecorder()
        let server = try await SSHSessionTests.Server(upward: reports)
        defer { Task { await server.stop() } }
        let counts = server.server.counts
        let local = freeLoopbackPort()
        let ssh = try #require(
            ChildProgram.start(
                [
                    "ssh", "-F", "/dev/null", "-p", "\(server.port)", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                    "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ExitOnForwardFailure=yes", "-N",
                    "-L", "127.0.0.1:\(local):127.0.0.1:\(idePort)", "127.0.0.1",
                ]))
        defer { ssh.kill() }
        // The client's listener is up once a connect succeeds.
        var socket: LoopbackSocket?
        #expect(
            await eventually(timeout: .seconds(60)) {
                socket = await LoopbackSocket.connect(port: local)
                return socket != nil
            })
        let client = try #require(socket)
        #expect(client.send("hello"))
        #expect(String(decoding: await client.read(atLeast: 5, timeout: .seconds(60)), as: UTF8.self) == "hello")
        #expect(await eventually(timeout: .seconds(60)) { counts.count(.jetbrains) == 1 })
        #expect(counts.count(.ssh) == 0)
        // The report is recorded after the count moves: waited for, not sampled.
        #expect(await eventually(timeout: .seconds(60)) { !reports.all.isEmpty })
        let connect = try #require(reports.all.first)
        #expect(connect.action == .connect && connect.kind == .jetbrains && connect.ip == "127.0.0.1", "\(connect)")

        client.shutdownWrite()
        #expect(await client.isClosedByPeer(within: .seconds(60)))
        #expect(await eventually(timeout: .seconds(60)) { counts.count(.jetbrains) == 0 })
        #expect(await eventually(timeout: .seconds(60)) { reports.all.count == 2 })
        let disconnect = try #require(reports.all.last)
        #expect(disconnect.action == .disconnect && disconnect.kind == .jetbrains && disconnect.id == connect.id, "\(disconnect)")
        #expect(disconnect.statusCode == 0 && disconnect.reason == "normal close", "\(disconnect)")
    }

    /// A forward to a plain process counts nowhere; a session typed JetBrains
    /// (`CODER_SSH_SESSION_TYPE=JetBrains`, the plugin's) counts nowhere and is not reported.
    @Test func plainForwardsAndJetBrainsTypedSessionsCountNowhere() async throws {
        let (plain, plainPort) = try await Self.echoServer(marker: nil)
        defer { plain.kill() }
        let reports = ReportRecorder()
        let server = try await SSHSessionTests.Server(upward: reports)
        defer { Task { await server.stop() } }
        let counts = server.server.counts
        let local = freeLoopbackPort()
        let session = try #require(
            ChildProgram.start(
                [
                    "ssh", "-F", "/dev/null", "-p", "\(server.port)", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                    "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "SetEnv=CODER_SSH_SESSION_TYPE=JetBrains", "-o", "ExitOnForwardFailure=yes",
                    "-L", "127.0.0.1:\(local):127.0.0.1:\(plainPort)", "127.0.0.1", "echo started; read line",
                ]))
        defer { session.kill() }
        #expect(await Self.readLine(session) == "started")
        #expect(counts.count(.ssh) == 0 && counts.count(.vscode) == 0 && counts.count(.jetbrains) == 0)
        #expect(reports.all.isEmpty, "\(reports.all)")
        let client = try #require(await LoopbackSocket.connect(port: local))
        #expect(client.send("ping"))
        #expect(String(decoding: await client.read(atLeast: 4, timeout: .seconds(60)), as: UTF8.self) == "ping")
        // The owner of the plain port is found, and it is not JetBrains.
        let line = try #require(await onThread { ProcSocketOwners().commandLine(ofLocalPort: UInt16(plainPort)) })
        #expect(String(decoding: line, as: UTF8.self).contains("python3"))
        #expect(!JetBrainsForward.isJetBrains(commandLine: line))
        client.shutdownWrite()
        #expect(await client.isClosedByPeer(within: .seconds(60)))
        _ = write(session.stdin, "\n", 1)
        #expect(await onThread { session.wait() } == 0)
        #expect(counts.count(.jetbrains) == 0 && counts.count(.ssh) == 0)
        #expect(reports.all.isEmpty, "\(reports.all)")
    }
}
