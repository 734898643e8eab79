import AgentCore
import AgentTestSupport
import Foundation
import Logging
import NIOCore
import NIOPosix
@testable import ReconnectingPTY
import Synchronization
import Testing

/// Real processes on real terminals, reached over loopback connections served by the same
/// handler as tailnet port 2: attach, type, detach, reattach with the replay, resize, two
/// attachments at once, the process's end, and the idle timeout on a test's clock.
@Suite(.timeLimit(.minutes(3)))
struct ReconnectingPTYSocketTests {
    final class Server: Sendable {
        let server: ReconnectingPTYServer
        let listener: LoopbackListener
        var port: Int { listener.port }

        let reports = ReportRecorder()
        let counts = SessionCounts()
        let log: CapturedLog

        init(limits: ReconnectingPTYServer.Limits = .init()) async throws {
            var environment = ProcessInfo.processInfo.environment
            environment["PS1"] = "$ "
            let log = CapturedLog()
            self.log = log
            let server = ReconnectingPTYServer(
                manifest: ManifestStore(), environment: environment, limits: limits, upward: reports, counts: counts,
                logger: log.logger)
            self.server = server
            listener = try await LoopbackListener { channel in server.serve(channel) }
        }

        func stop() async {
            server.closeAll()
            await listener.close()
        }

        /// A connection that has sent its init, asking for the buffered backend (the screen
        /// backend has a suite of its own).
        func attach(_ id: String, command: String = "sh", rows: UInt16 = 24, columns: UInt16 = 80) async throws -> LoopbackSocket {
            let socket = try #require(await LoopbackSocket.connect(port: port))
            #expect(socket.send(PTYInit(id: id, height: rows, width: columns, command: command, backendType: "buffered").frameBytes))
            return socket
        }
    }

    /// Detaches: the connection's end, as a browser tab that closes.
    func hangUp(_ socket: LoopbackSocket) {
        _ = shutdown(socket.fd, Int32(SHUT_RDWR))
    }

    static func type(_ socket: LoopbackSocket, _ text: String) {
        #expect(socket.send("{\"data\":\(jsonQuote(text))}"))
    }

    @Test func eachConnectionIsReportedAndCounted() async throws {
        let server = try await Server()
        defer { Task { await server.stop() } }
        let socket = try await server.attach(UUID().uuidString)
        Self.type(socket, "echo counted\r")
        _ = await socket.read(until: "counted")
        #expect(server.counts.count(.reconnectingPTY) == 1)
        #expect(server.reports.all.map(\.action) == [.connect])
        #expect(server.reports.all.first?.kind == .reconnectingPTY && server.reports.all.first?.ip == "127.0.0.1")
        hangUp(socket)
        #expect(await eventually(timeout: .seconds(30)) { server.counts.count(.reconnectingPTY) == 0 && server.reports.all.count == 2 })
        let end = server.reports.all.last
        #expect(end?.action == .disconnect && end?.statusCode == 0 && end?.reason == "graceful" && end?.id == server.reports.all.first?.id)
    }

    @Test func attachTypeDetachReattachWithTheReplayAndResize() async throws {
        let server = try await Server()
        defer { Task { await server.stop() } }
        let id = UUID().uuidString
        let first = try await server.attach(id)
        Self.type(first, "echo one-$((40+2))\r")
        let one = String(decoding: await first.read(until: "one-42"), as: UTF8.self)
        #expect(one.contains("one-42"), "\(one)")
        // A resize object, then the terminal's size as the shell sees it.
        #expect(first.send(#"{"height":33,"width":101}"#))
        Self.type(first, "stty size\r")
        let size = String(decoding: await first.read(until: "33 101"), as: UTF8.self)
        #expect(size.contains("33 101"), "\(size)")
        hangUp(first)

        // Reattached (its command ignored): the replay first, then the init's size, then live.
        let second = try await server.attach(id, command: "echo never-$((1+1))", rows: 20, columns: 70)
        let replay = String(decoding: await second.read(until: "33 101"), as: UTF8.self)
        #expect(replay.contains("one-42") && replay.contains("33 101"), "\(replay)")
        Self.type(second, "stty size; echo two-$((1+1))\r")
        let live = String(decoding: await second.read(until: "two-2"), as: UTF8.self)
        #expect(live.contains("20 70") && live.contains("two-2") && !live.contains("never-2"), "\(live)")
        #expect(server.server.count == 1)
    }

    @Test func aConnectionRefusedForTheAttachmentLimitTypesNothing() async throws {
        var limits = ReconnectingPTYServer.Limits()
        limits.maxAttachments = 1
        let server = try await Server(limits: limits)
        defer { Task { await server.stop() } }
        let id = UUID().uuidString
        let first = try await server.attach(id)
        Self.type(first, "echo ready-$((1+2))\r")
        _ = await first.read(until: "ready-3")
        // One over the limit: its init and its typing in one write, so they arrive in one read.
        let refused = try #require(await LoopbackSocket.connect(port: server.port))
        let frame = PTYInit(id: id, height: 24, width: 80, command: "sh", backendType: "buffered").frameBytes
        #expect(refused.send(frame + Array(#"{"data":"echo refused-$((4+5))\r"}"#.utf8)))
        #expect(await refused.isClosedByPeer(within: .seconds(30)))
        Self.type(first, "echo after-$((5+6))\r")
        let seen = String(decoding: await first.read(until: "after-11"), as: UTF8.self)
        #expect(seen.contains("after-11") && !seen.contains("refused-9"), "\(seen)")
    }

    @Test func twoAttachmentsBothSeeAndTypeAndTheProcesssEndClosesBoth() async throws {
        let server = try await Server()
        defer { Task { await server.stop() } }
        let id = UUID().uuidString
        let first = try await server.attach(id)
        Self.type(first, "echo ready-$((1+2))\r")
        _ = await first.read(until: "ready-3")
        let second = try await server.attach(id)
        _ = await second.read(until: "ready-3")
        Self.type(first, "echo from-first-$((2+3))\r")
        #expect(String(decoding: await second.read(until: "from-first-5"), as: UTF8.self).contains("from-first-5"))
        #expect(String(decoding: await first.read(until: "from-first-5"), as: UTF8.self).contains("from-first-5"))
        Self.type(second, "echo from-second-$((3+4))\r")
        #expect(String(decoding: await first.read(until: "from-second-7"), as: UTF8.self).contains("from-second-7"))
        // The shell's exit ends the session: both connections close and the ID is forgotten.
        Self.type(second, "exit\r")
        #expect(await first.isClosedByPeer(within: .seconds(30)))
        #expect(await second.isClosedByPeer(within: .seconds(30)))
        #expect(await eventually { server.server.count == 0 })
        // The same ID now starts afresh, with its own command and no replay of the old one.
        let third = try await server.attach(id, command: "echo fresh-$((3+4)); sleep 0.2")
        let fresh = await third.readAll(timeout: .seconds(30))
        let text = String(decoding: fresh.bytes, as: UTF8.self)
        #expect(fresh.closed && text.contains("fresh-7") && !text.contains("from-first"), "\(fresh.closed) \(text)\n\(server.log.text)")
    }

    /// The exit bound at zero: the session ends as soon as the exit is seen, and still every
    /// byte the process wrote reaches the attachment (the terminal is read to its end first,
    /// whether or not the loop polled it since the last write). Several rounds: without the
    /// final read the tail was lost in most of them.
    @Test(arguments: 0..<4) func theExitBoundLosesNoOutput(round: Int) async throws {
        var limits = ReconnectingPTYServer.Limits()
        limits.exitDrainBound = .zero
        let server = try await Server(limits: limits)
        defer { Task { await server.stop() } }
        let socket = try await server.attach(UUID().uuidString, command: "seq 1 20000; echo end-$((\(round)+40))")
        let all = await socket.readAll(timeout: .seconds(60))
        let text = String(decoding: all.bytes, as: UTF8.self)
        #expect(all.closed && text.contains("19999\r\n20000\r\nend-\(round + 40)"), "\(all.closed) \(text.suffix(200))\n\(server.log.text)")
    }

    /// A background job does not keep the session: the shell's exit hangs the terminal up
    /// (or, failing that, the exit bound passes) and the session ends while the job, which
    /// ignores the hangup, still runs.
    @Test func aBackgroundJobDoesNotKeepTheSession() async throws {
        var limits = ReconnectingPTYServer.Limits()
        limits.exitDrainBound = .milliseconds(300)
        let server = try await Server(limits: limits)
        defer { Task { await server.stop() } }
        let directory = NSTemporaryDirectory() + "pty-bg-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The shell exits only once the job ignores the hangup its exit brings.
        let socket = try await server.attach(UUID().uuidString, command: "sh -c 'trap \"\" HUP; echo $$ > \(directory)/job.tmp; mv \(directory)/job.tmp \(directory)/job; exec sleep 600' & i=0; while [ ! -s \(directory)/job ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; echo started")
        let all = await socket.readAll(timeout: .seconds(60))
        #expect(all.closed && String(decoding: all.bytes, as: UTF8.self).contains("started"))
        #expect(await eventually { server.server.count == 0 })
        let written = try #require(FileManager.default.contents(atPath: directory + "/job"))
        let job = try #require(pid_t(String(decoding: written, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        // Still running when the session had ended: not the job's end ended the session.
        #expect(kill(job, 0) == 0)
        kill(job, SIGKILL)
    }

    /// At the agent's shutdown a job that ignores the hangup dies too, though an interactive
    /// shell ran it in a process group of its own: SIGTERM to every group of the session, and
    /// SIGKILL after the grace for one that ignores SIGTERM as well.
    @Test(arguments: ["HUP", "HUP TERM"]) func theShutdownEndsJobsThatIgnoreTheHangup(ignored: String) async throws {
        var limits = ReconnectingPTYServer.Limits()
        limits.shutdownGrace = .milliseconds(300)
        let server = try await Server(limits: limits)
        defer { Task { await server.stop() } }
        let directory = NSTemporaryDirectory() + "pty-shutdown-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = try await server.attach(UUID().uuidString, command: "bash --norc -i")
        Self.type(socket, "trap '' \(ignored); sh -c 'echo $$ > \(directory)/job.tmp; mv \(directory)/job.tmp \(directory)/job; exec sleep 300'\r")
        #expect(await eventually(timeout: .seconds(60)) { FileManager.default.fileExists(atPath: directory + "/job") })
        let written = try #require(FileManager.default.contents(atPath: directory + "/job"))
        let job = try #require(pid_t(String(decoding: written, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        let jobProcess = try #require(ProcessInstance(job))
        #expect(getpgid(job) == job, "the interactive shell gave the job a group of its own")
        await server.server.shutdown()
        #expect(await eventually(timeout: .seconds(30)) { jobProcess.hasEnded }, "job \(job) outlived the shutdown")
        jobProcess.killIfRunning()
    }

    /// A connection after the shutdown began (the dashboard reconnects on its own) is closed
    /// and starts nothing: a session made then would never be ended.
    @Test func aConnectionAfterTheShutdownStartsNoSession() async throws {
        let server = try await Server()
        defer { Task { await server.stop() } }
        let directory = NSTemporaryDirectory() + "pty-late-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let before = try await server.attach(UUID().uuidString, command: "echo up; exec sleep 600")
        _ = await before.read(until: "up")
        await server.server.shutdown()
        #expect(server.server.count == 0)
        let late = try await server.attach(UUID().uuidString, command: "touch \(directory)/started; exec sleep 600")
        #expect(await late.isClosedByPeer(within: .seconds(30)))
        #expect(server.server.count == 0)
        #expect(!FileManager.default.fileExists(atPath: directory + "/started"))
        // An init that was read just before the shutdown closed its connection: refused,
        // and said as what it is, not as the session cap.
        let frame = PTYInit(id: UUID().uuidString, height: 24, width: 80, command: "touch \(directory)/started", backendType: "buffered")
        #expect(server.server.session(for: frame, on: MultiThreadedEventLoopGroup.singleton.any()) == nil)
        #expect(server.log.contains("the agent is shutting down"), "\(server.log.text)")
        #expect(!server.log.contains("too many reconnecting pty sessions"), "\(server.log.text)")
    }

    @Test func aDetachedSessionEndsAfterTheIdleTimeoutOnTheTestsClock() async throws {
        let clock = ManualClock()
        var limits = ReconnectingPTYServer.Limits()
        limits.sleep = { try await clock.sleep(for: $0) }
        let server = try await Server(limits: limits)
        defer { Task { await server.stop() } }
        let id = UUID().uuidString
        let first = try await server.attach(id, command: "echo started; exec sleep 600")
        _ = await first.read(until: "started")
        // Attached, no timer sleeps (the attach timer was cancelled); detaching arms the idle one.
        #expect(await eventually { clock.sleeping == 0 })
        hangUp(first)
        #expect(await eventually { clock.sleeping == 1 })
        clock.advance(by: .seconds(299))
        #expect(clock.sleeping == 1 && server.server.count == 1)
        // Reattaching within the time keeps the session (the same process's replay) and
        // cancels the idle timer: one timer at most, never one per detach.
        let second = try await server.attach(id)
        #expect(String(decoding: await second.read(until: "started"), as: UTF8.self).contains("started"))
        #expect(await eventually { clock.sleeping == 0 })
        hangUp(second)
        #expect(await eventually { clock.sleeping == 1 })
        clock.advance(by: .seconds(299))
        #expect(clock.sleeping == 1 && server.server.count == 1)
        clock.advance(by: .seconds(1))
        #expect(await eventually { server.server.count == 0 })
        #expect(clock.sleeping == 0)
    }

    @Test func badInitsAndInputsCloseTheConnection() async throws {
        let server = try await Server()
        defer { Task { await server.stop() } }
        let bad = try #require(await LoopbackSocket.connect(port: server.port))
        #expect(bad.send([3, 0] + Array("{x}".utf8)))
        #expect(await bad.isClosedByPeer(within: .seconds(30)))
        let id = UUID().uuidString
        let attached = try await server.attach(id)
        Self.type(attached, "echo ok-$((2*3))\r")
        _ = await attached.read(until: "ok-6")
        #expect(attached.send("[1]"))
        #expect(await attached.isClosedByPeer(within: .seconds(30)))
        // The session lives on for the next attach.
        #expect(server.server.count == 1)
    }
}
