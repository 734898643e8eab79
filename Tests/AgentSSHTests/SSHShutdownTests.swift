import AgentTestSupport
import AgentSystem
@testable import AgentSSH
import Foundation
import Testing

/// Agent shutdown ends every SSH session's processes, those that ignore the hangup of their
/// client's going too (`trap '' HUP`): SIGTERM to the group, then SIGKILL after the grace.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SSHShutdownTests {
    /// Starts `ssh [options] 127.0.0.1 command`, where the command writes its shell's pid to
    /// `marker` first; returns the client and that pid.
    static func start(
        _ server: SSHSessionTests.Server, _ options: [String], _ command: String, marker: String
    ) async throws
        -> (ChildProgram.Running, pid_t)
    {
        let client = try #require(
            ChildProgram.start(
                ["ssh"] + SSHClientEdgeTests.options + options + ["-p", "\(server.port)", "127.0.0.1", "echo $$ > \(marker).tmp; mv \(marker).tmp \(marker); \(command)"]))
        #expect(await eventually(timeout: .seconds(60)) { access(marker, F_OK) == 0 }, "the session never started")
        let pid = try #require(Int32(try String(contentsOfFile: marker, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        return (client, pid)
    }

    @Test(arguments: [[], ["-tt"]])
    func sessionsThatIgnoreTheHangupEndAtShutdown(options: [String]) async throws {
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let marker = NSTemporaryDirectory() + "ssh-shutdown-\(UUID().uuidString.prefix(8))"
        defer { unlink(marker) }
        let (client, pid) = try await Self.start(server, options, "trap '' HUP; sleep 300; echo outlived", marker: marker)
        defer { Task { await onThread { client.kill() } } }
        let shell = try #require(ProcessInstance(pid))
        // The shell may write its pid before the server records it (just after the spawn).
        #expect(await eventually { server.server.sessions.processes.contains(pid) })
        await server.server.shutdown()
        #expect(await eventually(timeout: .seconds(60)) { shell.hasEnded }, "the session's shell outlived the shutdown")
        #expect(await eventually(timeout: .seconds(60)) { server.server.sessions.processes.isEmpty })
    }

    /// A process recorded after shutdown's sweep (spawned just before it, its pid recorded
    /// just after) that ignores SIGTERM is killed after the grace as well.
    @Test func aProcessTrackedDuringShutdownIsKilledAfterTheGrace() async throws {
        let registry = SessionRegistry()
        await registry.terminateProcesses(grace: .milliseconds(300))
        let marker = NSTemporaryDirectory() + "ssh-late-\(UUID().uuidString.prefix(8))"
        defer { unlink(marker) }
        let process = try SessionProcess.spawn(
            argv: ["/bin/sh", "-c", "trap '' TERM; touch \(marker); exec sleep 300"], environment: { _ in [:] }, directory: "/",
            terminal: nil)
        // Its SIGTERM is ignored from here on (an ignored signal stays ignored across exec).
        #expect(await eventually { access(marker, F_OK) == 0 })
        let late = try #require(ProcessInstance(process.pid))
        registry.track(process.pid)
        let ended = await eventually(timeout: .seconds(60)) { late.hasEnded }
        #expect(ended, "a late process outlived the grace")
        late.killIfRunning()
        #expect(await onThread { process.waitForExit() } != 0)
        registry.reaped(process.pid)
    }

    /// A process that ignores SIGTERM too is killed once the grace has passed.
    @Test func whatIgnoresTERMIsKilledAfterTheGrace() async throws {
        var limits = SSHConnectionLimits()
        limits.shutdownGrace = .milliseconds(500)
        let server = try await SSHSessionTests.Server(limits: limits)
        defer { Task { await server.stop() } }
        let marker = NSTemporaryDirectory() + "ssh-shutdown-\(UUID().uuidString.prefix(8))"
        defer { unlink(marker) }
        let (client, pid) = try await Self.start(server, [], "trap '' HUP TERM; sleep 300; echo outlived", marker: marker)
        defer { Task { await onThread { client.kill() } } }
        let shell = try #require(ProcessInstance(pid))
        await server.server.shutdown()
        #expect(await eventually(timeout: .seconds(60)) { shell.hasEnded }, "the session's shell outlived SIGKILL")
    }

    /// A job the session's shell ran in a process group of its own (job control, as an
    /// interactive shell does) and that ignores the hangup is ended too: the shutdown signals
    /// every group of the session, not only the shell's.
    @Test(arguments: [[], ["-tt"]])
    func aJobInAGroupOfItsOwnEndsAtShutdown(options: [String]) async throws {
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let marker = NSTemporaryDirectory() + "ssh-shutdown-\(UUID().uuidString.prefix(8))"
        let job = marker + "-job"
        defer { unlink(marker); unlink(job) }
        let (client, _) = try await Self.start(
            server, options, "set -m; trap '' HUP; sh -c 'echo $$ > \(job).tmp; mv \(job).tmp \(job); exec sleep 300' & wait", marker: marker)
        defer { Task { await onThread { client.kill() } } }
        #expect(await eventually(timeout: .seconds(60)) { access(job, F_OK) == 0 }, "the job never started")
        let jobPID = try #require(Int32(try String(contentsOfFile: job, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        let jobProcess = try #require(ProcessInstance(jobPID))
        #expect(getpgid(jobPID) == jobPID, "the job has a group of its own")
        await server.server.shutdown()
        #expect(await eventually(timeout: .seconds(60)) { jobProcess.hasEnded }, "the job outlived the shutdown")
        jobProcess.killIfRunning()
    }

    /// The client's going still hangs a session up (SIGHUP to its group), with no shutdown.
    @Test func aClientsGoingStillHangsUp() async throws {
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let marker = NSTemporaryDirectory() + "ssh-hangup-\(UUID().uuidString.prefix(8))"
        defer { unlink(marker) }
        let (client, pid) = try await Self.start(server, [], "sleep 300", marker: marker)
        let shell = try #require(ProcessInstance(pid))
        await onThread { client.kill() }
        #expect(await eventually(timeout: .seconds(60)) { shell.hasEnded })
        #expect(await eventually(timeout: .seconds(60)) { server.server.sessions.processes.isEmpty })
    }
}

/// A session refused at the cap answers its request before it closes, and the `ssh -R`
/// listener cap grants what it says.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SSHRefusalTests {
    @Test func aSessionBeyondTheCapGetsAFailureReplyBeforeItsClose() async throws {
        var limits = SSHConnectionLimits()
        limits.maxSessions = 1
        let server = try await SSHSessionTests.Server(limits: limits)
        defer { Task { await server.stop() } }
        let client = try await SSHTestClient.connect(port: server.port)
        defer { Task { await client.close() } }
        let first = try await client.open()
        first.exec("read line")
        #expect(await first.wait { $0.contains(.success) }, "\(first.events)")
        let refused = try await client.open()
        refused.exec("echo never")
        #expect(await refused.wait { $0.contains(.closed) }, "\(refused.events)")
        let events = refused.events
        let reply = try #require(events.firstIndex(of: .failure), "no reply to the exec request: \(events)")
        #expect(reply < events.firstIndex(of: .closed)!, "\(events)")
        #expect(events.contains(.exitStatus(1)), "\(events)")
        #expect(events.contains(.stderr("too many SSH sessions (at most 1)\r\n")), "\(events)")
        // The first session is untouched.
        first.write("done\n")
        #expect(await first.wait { $0.contains(.exitStatus(0)) }, "\(first.events)")
    }

    @Test func sixteenReverseForwardsAreGrantedAndNoMore() async throws {
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let client = try await SSHTestClient.connect(port: server.port)
        defer { Task { await client.close() } }
        var ports: [Int] = []
        for index in 0..<ReverseForwarding.maxListeners {
            do {
                ports.append(try #require(try await client.forward(host: "127.0.0.1", port: 0)))
            } catch {
                Issue.record("listener \(index + 1) of \(ReverseForwarding.maxListeners) refused: \(error)")
                return
            }
        }
        #expect(Set(ports).count == 16 && ReverseForwarding.maxListeners == 16)
        await #expect(throws: (any Error).self) { _ = try await client.forward(host: "127.0.0.1", port: 0) }
    }
}
