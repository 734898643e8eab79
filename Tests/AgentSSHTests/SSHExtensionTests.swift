@testable import AgentSSH
import AgentTestSupport
import Foundation
import Testing

/// OpenSSH's extensions with OpenSSH's own tools: `ssh -A` with a real `ssh-agent`, `ssh -X`
/// with Xvfb and `xdpyinfo`, and Unix socket forwards (`ssh -L` and `ssh -R` with paths).
/// Before the rewriter, `ssh -X` ended the whole connection (swift-nio-ssh could not parse
/// `x11-req`) and a Unix socket forward did too.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SSHExtensionTests {
    static let options = [
        "-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
        "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=60",
    ]

    static func scratch(_ name: String) throws -> String {
        // Short: Unix socket paths must fit in 107 bytes.
        let directory = "/tmp/\(name)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test func agentForwardingReachesTheClientsAgent() async throws {
        let directory = try Self.scratch("ssh-agent-test")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let agentSocket = directory + "/agent.sock"
        let agent = try #require(ChildProgram.start(["ssh-agent", "-D", "-a", agentSocket]))
        defer { Task { await onThread { agent.kill() } } }
        #expect(await eventually(timeout: .seconds(30)) { access(agentSocket, F_OK) == 0 })
        let key = directory + "/key"
        let made = await ChildProgram.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], stderrToStdout: true)
        #expect(made.status == 0, "\(made)")
        let added = await ChildProgram.run(["ssh-add", "-q", key], environment: ["SSH_AUTH_SOCK": agentSocket], stderrToStdout: true)
        #expect(added.status == 0, "\(added)")
        let fingerprint = try #require(
            await ChildProgram.run(["ssh-keygen", "-l", "-f", key + ".pub"]).stdout.split(separator: " ").dropFirst().first.map(String.init))

        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let outcome = await ChildProgram.run(
            ["ssh"] + Self.options + ["-A", "-p", "\(server.port)", "127.0.0.1", "ssh-add -l; echo sock=$SSH_AUTH_SOCK"],
            environment: ["SSH_AUTH_SOCK": agentSocket], stderrToStdout: true)
        #expect(outcome.status == 0 && outcome.stdout.contains(fingerprint), "\(outcome)")
        // The session's agent socket is the agent's, and goes with the session.
        let remote = try #require(outcome.stdout.split(separator: "\n").last { $0.hasPrefix("sock=") }.map { String($0.dropFirst(5)) })
        #expect(remote.hasSuffix("/listener.sock") && remote != agentSocket, "\(remote)")
        #expect(await eventually(timeout: .seconds(30)) { access(remote, F_OK) != 0 }, "\(remote) outlived its session")
        // Without -A there is no agent.
        let without = await ChildProgram.run(
            ["ssh"] + Self.options + ["-p", "\(server.port)", "127.0.0.1", "echo sock=${SSH_AUTH_SOCK:-none}"],
            environment: ["SSH_AUTH_SOCK": agentSocket])
        #expect(without.stdout == "sock=none\n", "\(without)")
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/Xvfb"), "Xvfb is missing (Debian: xvfb)"))
    func x11ForwardingReachesTheClientsDisplay() async throws {
        let directory = try Self.scratch("ssh-x11-test")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Xvfb picks a display nobody uses and writes its number once it listens; SIGTERM
        // lets it remove its socket and lock file again.
        let xvfb = try #require(ChildProgram.start(["Xvfb", "-displayfd", "1", "-nolisten", "tcp", "-screen", "0", "640x480x24"]))
        defer { Task { await onThread { xvfb.terminate() } } }  // when a #require ends the test early
        let announced = await onThread { xvfb.readLine() }
        let display = try #require(Int(announced), "Xvfb announced no display: \(announced)")
        #expect(access("/tmp/.X11-unix/X\(display)", F_OK) == 0)

        let authority = directory + "/Xauthority"
        var environment = ProcessInfo.processInfo.environment
        environment["XAUTHORITY"] = authority
        let server = try await SSHSessionTests.Server(environment: environment)
        defer { Task { await server.stop() } }
        let outcome = await ChildProgram.run(
            ["ssh"] + Self.options + [
                "-X", "-p", "\(server.port)", "127.0.0.1",
                "echo DISPLAY=$DISPLAY; xdpyinfo | grep -E 'name of display|dimensions'",
            ],
            environment: ["DISPLAY": ":\(display)", "XAUTHORITY": directory + "/client-authority"], stderrToStdout: true)
        #expect(outcome.status == 0, "\(outcome)")
        let shown = try #require(outcome.stdout.split(separator: "\n").first { $0.hasPrefix("DISPLAY=") }.map { String($0.dropFirst(8)) })
        #expect(shown.hasPrefix("localhost:") && shown.hasSuffix(".0"), "\(outcome)")
        #expect(outcome.stdout.contains("name of display:    \(shown)") && outcome.stdout.contains("640x480 pixels"), "\(outcome)")
        // The session's cookie went to the agent's Xauthority file, not the user's.
        let listed = await ChildProgram.run(["xauth", "-f", authority, "list"])
        #expect(listed.stdout.contains("MIT-MAGIC-COOKIE-1"), "\(listed)")
        await onThread { xvfb.terminate() }
        #expect(access("/tmp/.X11-unix/X\(display)", F_OK) != 0, "Xvfb left its socket")
    }

    @Test func unixSocketForwardsBothWays() async throws {
        let directory = try Self.scratch("ssh-unix-test")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // One echo server in the workspace (for -L) and one on the client's side (for -R).
        func echoServer(_ path: String, _ tag: String) -> ChildProgram.Running? {
            ChildProgram.start([
                "python3", "-c",
                """
                import socket
                s = socket.socket(socket.AF_UNIX); s.bind("\(path)"); s.listen()
                while True:
                    c, _ = s.accept(); c.sendall(b"\(tag):" + c.recv(100)); c.close()
                """,
            ])
        }
        let workspace = try #require(echoServer(directory + "/workspace.sock", "workspace"))
        let client = try #require(echoServer(directory + "/client.sock", "client"))
        defer {
            Task {
                await onThread {
                    workspace.kill(); client.kill()
                }
            }
        }
        #expect(
            await eventually(timeout: .seconds(30)) {
                access(directory + "/workspace.sock", F_OK) == 0 && access(directory + "/client.sock", F_OK) == 0
            })

        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let tunnel = try #require(
            ChildProgram.start(
                ["ssh"] + Self.options + [
                    "-N", "-o", "ExitOnForwardFailure=yes", "-p", "\(server.port)",
                    "-L", "\(directory)/local.sock:\(directory)/workspace.sock",
                    "-R", "\(directory)/remote.sock:\(directory)/client.sock", "127.0.0.1",
                ]))
        defer { Task { await onThread { tunnel.kill() } } }
        #expect(
            await eventually(timeout: .seconds(60)) {
                access(directory + "/local.sock", F_OK) == 0 && access(directory + "/remote.sock", F_OK) == 0
            })
        func ask(_ path: String) async -> String {
            await ChildProgram.run(
                [
                    "python3", "-c",
                    """
                    import socket
                    s = socket.socket(socket.AF_UNIX); s.settimeout(30); s.connect("\(path)"); s.sendall(b"hi"); print(s.recv(100).decode())
                    """,
                ], stderrToStdout: true
            ).stdout
        }
        #expect(await ask(directory + "/local.sock") == "workspace:hi\n")
        #expect(await ask(directory + "/remote.sock") == "client:hi\n")
        // The agent's socket is made 0600 and goes with the connection.
        var info = stat()
        #expect(stat(directory + "/remote.sock", &info) == 0 && info.st_mode & 0o777 == 0o600)
        await onThread { tunnel.kill() }
        #expect(await eventually(timeout: .seconds(30)) { access(directory + "/remote.sock", F_OK) != 0 })
    }
}
