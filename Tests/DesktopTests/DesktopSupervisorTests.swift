import AgentCore
import AgentTestSupport
import Foundation
import Testing

@testable import Desktop

/// The supervisor with a real Xvnc: one desktop reused, a crash noticed and recovered,
/// everything stopped at close.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct DesktopSupervisorTests {
    static func supervisor(
        environment: [String: String] = ProcessInfo.processInfo.environment, sessions: SessionEnvironment? = nil
    ) -> DesktopSupervisor {
        DesktopSupervisor(
            configuration: .init(
                environment: environment, stateDirectory: NSTemporaryDirectory() + "desktop-supervisor-test", sessionEnvironment: sessions))
    }

    /// Pids of Xvnc processes serving `info`'s display and port (other suites start their own).
    static func xvnc(_ info: DesktopInfo) async -> [Int32] {
        let out = await DesktopHarness.run(["pgrep", "-f", "^\\S*Xvnc :\(info.display) -rfbport \(info.vncPort) "])
        return out.split(separator: "\n").compactMap { Int32($0) }
    }

    /// Desktops started at the same moment (agents sharing a machine, or tests) all see the
    /// same first free display; each still gets one of its own (a loser's Xvnc exits and the
    /// next display is tried).
    ///
    /// With a stale lock on the first free display (an X server killed without cleaning up),
    /// every starter's Xvnc finds it stale and replaces it: two can end up running on one
    /// display, and the one whose lock was replaced must give it up.
    @Test(arguments: [false, true])
    func desktopsStartedAtOnceEachGetADisplay(staleLock: Bool) async throws {
        var planted: (path: String, text: String)?
        if staleLock, let display = XvncLauncher.freeDisplay(), XvncLauncher.lockHolder(display) == nil {
            // A pid that existed and was reaped: no process has it (the kernel recycles pids
            // only after the whole range; the test's own children come nowhere near).
            let dead = try #require(ChildProgram.start(["true"]))
            let pid = dead.pid
            _ = dead.wait()
            let text = String(format: "%10d\n", pid)
            let path = "/tmp/.X\(display)-lock"
            if FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o444]) {
                planted = (path, text)
            }
        }
        defer {
            // Removed only if still the test's own (an Xvnc replaces it with its own).
            if let planted, (try? String(contentsOfFile: planted.path, encoding: .utf8)) == planted.text {
                try? FileManager.default.removeItem(atPath: planted.path)
            }
        }
        let supervisors = (0..<6).map { _ in Self.supervisor() }
        let started = await withTaskGroup(of: DesktopInfo?.self) { group in
            for supervisor in supervisors { group.addTask { try? await supervisor.ensureStarted() } }
            var infos: [DesktopInfo] = []
            for await info in group { if let info { infos.append(info) } }
            return infos
        }
        #expect(started.count == 6, "every start succeeded")
        #expect(Set(started.map(\.display)).count == started.count, "displays of their own: \(started.map(\.display))")
        for info in started {
            #expect(await Self.xvnc(info).first == XvncLauncher.lockHolder(info.display), "display :\(info.display)'s lock is its Xvnc's")
        }
        for supervisor in supervisors { await supervisor.close() }
    }

    /// The running desktop's DISPLAY is published for started processes, the
    /// new one's after a crash, none after close.
    @Test func oneDesktopReusedACrashRecoveredAndCloseStopsIt() async throws {
        let sessions = SessionEnvironment()
        let supervisor = Self.supervisor(sessions: sessions)
        #expect(sessions.current.variables.isEmpty)
        let first = try await supervisor.ensureStarted()
        #expect(first.width == 1920 && first.height == 1080 && first.display >= 10)
        #expect(sessions.current.variables == ["DISPLAY": ":\(first.display)"])
        #expect(try await supervisor.ensureStarted() == first, "the second start returns the same desktop")
        let pids = await Self.xvnc(first)
        #expect(pids.count == 1, "one Xvnc")
        #expect(LoopbackProbe.rfbBanner(port: first.vncPort), "loopback RFB")

        // Xvnc dies behind the agent's back: the next use starts a new one.
        kill(pids[0], SIGKILL)
        // Its exit is seen within milliseconds (the waiting thread reaps it).
        var second = first
        #expect(
            await eventually {
                second = (try? await supervisor.ensureStarted()) ?? first
                return second != first
            })
        #expect(LoopbackProbe.rfbBanner(port: second.vncPort))
        #expect(sessions.current.variables == ["DISPLAY": ":\(second.display)"])

        await supervisor.close()
        #expect(sessions.current.variables.isEmpty, "withdrawn at close")
        #expect(await Self.xvnc(second).isEmpty, "stopped at close")
        #expect(LoopbackProbe.connect(port: second.vncPort) == nil, "its port is closed")
        do {
            _ = try await supervisor.ensureStarted()
            Issue.record("started after close")
        } catch {
            #expect(error == .closed)
        }
    }

    @Test func withNothingToRunTheErrorSaysWhatIsMissingAndIsRemembered() async throws {
        let supervisor = Self.supervisor(environment: ["PATH": "/nonexistent"])
        for _ in 0..<2 {
            do {
                _ = try await supervisor.ensureStarted()
                Issue.record("started without Xvnc")
            } catch {
                #expect(error.description == "portabledesktop binary not found in PATH or script bin directory, and Xvnc is not installed")
            }
        }
        await supervisor.close()
    }

    @Test func anIdleDesktopIsStopped() async throws {
        let sessions = SessionEnvironment()
        let supervisor = DesktopSupervisor(
            configuration: .init(
                idleTimeout: .milliseconds(1), environment: ProcessInfo.processInfo.environment, stateDirectory: NSTemporaryDirectory(),
                sessionEnvironment: sessions))
        let info = try await supervisor.ensureStarted()
        #expect(sessions.current.variables == ["DISPLAY": ":\(info.display)"])
        try await Task.sleep(for: .milliseconds(20))
        await supervisor.stopIfIdle()
        #expect(await Self.xvnc(info).isEmpty)
        #expect(sessions.current.variables.isEmpty, "withdrawn when the idle desktop stopped")
        // The next use starts one again.
        let again = try await supervisor.ensureStarted()
        #expect(LoopbackProbe.rfbBanner(port: again.vncPort))
        await supervisor.close()
    }

    /// The desktop's own files are private whatever the umask (the agent is not run with a
    /// restrictive one, which its children would inherit): Xvnc's log directory 0700, its
    /// logs 0600.
    @Test func theDesktopsOwnFilesArePrivateUnderAPermissiveUmask() async throws {
        let previous = umask(0o022)
        defer { umask(previous) }
        try await DesktopHarness.with { desktop in
            #expect(
                await eventually(timeout: .seconds(90)) {
                    (try? await desktop.action(#"{"action":"cursor_position"}"#))?.status == 200
                })
            let directory = desktop.state + "/desktop"
            var info = stat()
            try #require(stat(directory, &info) == 0, "no \(directory)")
            #expect(info.st_mode & 0o777 == 0o700, "\(directory): \(String(info.st_mode & 0o777, radix: 8))")
            let logs = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("xvnc-") }
            #expect(!logs.isEmpty)
            for log in logs {
                try #require(stat(directory + "/" + log, &info) == 0)
                #expect(info.st_mode & 0o777 == 0o600, "\(log): \(String(info.st_mode & 0o777, radix: 8))")
            }
        }
    }
}
