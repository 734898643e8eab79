import AgentCore
import FoundationEssentials
import Glibc
import NIOPosix

/// Runs TigerVNC's `Xvnc` directly when portabledesktop is absent:
/// loopback only (`-localhost -interface 127.0.0.1`), no authentication, shared sessions,
/// the first free display from 10, a free port, ready once the port answers `RFB 003.`.
struct XvncLauncher: DesktopLauncher {
    let xvnc: String
    let width: Int
    let height: Int
    /// Xvnc's output goes to `xvnc-<display>.log` here (truncated at each start).
    let logDirectory: String
    let environment: [String: String]

    var summary: String { "Xvnc at \(xvnc)" }

    static let readinessTimeout: Duration = .seconds(15)
    /// Displays tried in one start (each failed try is an Xvnc that exited at once).
    static let maxTries = 16

    func start() async throws(DesktopError) -> any RunningDesktop {
        var lastError = DesktopError("Xvnc did not start")
        // A display or port taken between the check and Xvnc's bind: try the next ones.
        // Agents (or tests) starting desktops at once all see the same first free display,
        // and each round only one of them gets it; a loser's Xvnc exits at once, so a try
        // costs little. An Xvnc that neither listens nor exits within the readiness timeout
        // is not tried again (the next would most likely hang the same way).
        var tried: Set<Int> = []
        for _ in 0..<Self.maxTries {
            guard let display = Self.freeDisplay(excluding: tried), let port = LoopbackProbe.freePort() else {
                throw DesktopError("no free X display or loopback port for Xvnc")
            }
            // Private whatever the umask: the logs show what ran on the user's screen.
            try? FileManager.default.createDirectory(
                atPath: logDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            tried.insert(display)
            let logPath = logDirectory + "/xvnc-\(display).log"
            let logFD = open(logPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard logFD >= 0 else { throw DesktopError("cannot open \(logPath): \(String(cString: strerror(errno)))") }
            let argv = [
                xvnc, ":\(display)", "-rfbport", "\(port)", "-localhost", "-interface", "127.0.0.1", "-SecurityTypes", "None",
                "-AlwaysShared", "-AcceptSetDesktopSize", "-geometry", "\(width)x\(height)", "-depth", "24", "-desktop", "Coder",
                "-nolisten", "tcp",
                // Every viewer that goes away before authenticating is a "security failure";
                // five would lock all loopback viewers out for 10 s (there is no auth here).
                "-BlacklistThreshold", "1000000",
            ]
            let child: SupervisedChild
            do {
                child = try await SupervisedChild.spawn(argv, environment: environment, outputFD: logFD)
            } catch {
                close(logFD)
                throw DesktopError("cannot start Xvnc: \(error)")
            }
            close(logFD)
            let waitStarted = ContinuousClock.now
            if await Self.waitForBanner(port: port, child: child) {
                if Self.lockHolder(display) == child.pid {
                    return XvncDesktop(child: child, info: DesktopInfo(vncPort: port, width: width, height: height, display: display))
                }
                // Two X servers that both found a stale lock both replace it (the X server's
                // own check and removal are two steps), and both run: the one whose lock was
                // replaced serves a display that is not its own. It gives the display up.
                await child.stop()
                lastError = DesktopError("display :\(display) was taken by another X server as Xvnc started")
                continue
            }
            let hung = child.isRunning && ContinuousClock.now - waitStarted >= Self.readinessTimeout
            await child.stop()
            let tail = (try? String(contentsOfFile: logPath, encoding: .utf8)).map { String($0.suffix(400)) } ?? ""
            lastError = DesktopError("Xvnc did not become ready on 127.0.0.1:\(port): \(tail.trimmingWhitespace())")
            if hung { break }
        }
        throw lastError
    }

    /// Polls every 50 ms until the port listens, then reads the RFB banner once; at most
    /// ``readinessTimeout``; false if the child exits first.
    static func waitForBanner(port: Int, child: SupervisedChild) async -> Bool {
        let deadline = ContinuousClock.now + readinessTimeout
        while ContinuousClock.now < deadline, child.isRunning {
            let listening = (try? await NIOThreadPool.singleton.runIfActive { LoopbackProbe.isListening(port: port) }) ?? false
            if listening {
                return (try? await NIOThreadPool.singleton.runIfActive { LoopbackProbe.rfbBanner(port: port, timeoutMs: 5000) }) ?? false
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// The pid in `display`'s X lock file (`/tmp/.X<n>-lock`, written by the X server that
    /// holds it), or nil.
    static func lockHolder(_ display: Int) -> Int32? {
        guard let text = lockText(display) else { return nil }
        return Int32(text.trimmingWhitespace())
    }

    /// The text of `display`'s lock file, read without blocking or following a link, if it
    /// is a small regular file: in the shared `/tmp` anyone can put a FIFO at the name, whose
    /// open for reading waited for a writer for ever (the desktop's start with it).
    static func lockText(_ display: Int) -> String? {
        AtomicFile.read("/tmp/.X\(display)-lock", maxBytes: 64).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The first free display from 10 (``isFree(_:)``) not in `tried` (a display whose Xvnc
    /// exited at once is not tried again in the same start).
    static func freeDisplay(excluding tried: Set<Int> = []) -> Int? {
        (10..<200).first { !tried.contains($0) && isFree($0) }
    }

    /// True when an X server of this network namespace holds the display's abstract socket
    /// (`@/tmp/.X11-unix/X<n>`): one in another mount namespace (a pod's sidecar, a
    /// container on the host's network) has no lock file or socket file that this one sees.
    /// Checked by binding that name for a moment (an abstract socket leaves nothing behind).
    static func abstractSocketTaken(_ display: Int) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let bound = UnixSocket.withAbstractAddress(Array("/tmp/.X11-unix/X\(display)".utf8)) { bind(fd, $0, $1) } ?? -1
        return bound != 0 && errno == EADDRINUSE
    }

    /// True if `display`'s abstract socket is free and it has neither a lock file nor a
    /// socket, or only a stale lock: one
    /// naming a process that no longer exists (an X server killed without cleaning up). An X
    /// server replaces a stale lock and its socket itself (Xvnc does), so those displays are
    /// not lost for good; nothing here removes them.
    static func isFree(_ display: Int) -> Bool {
        guard !abstractSocketTaken(display) else { return false }
        let lock = "/tmp/.X\(display)-lock"
        guard let text = lockText(display) else {
            return !FileManager.default.fileExists(atPath: lock) && !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(display)")
        }
        guard let pid = Int32(text.trimmingWhitespace()), pid > 0 else { return false }
        return kill(pid, 0) != 0 && errno == ESRCH
    }
}

/// An Xvnc the agent started and owns.
struct XvncDesktop: RunningDesktop {
    let child: SupervisedChild
    let info: DesktopInfo

    var isAlive: Bool { child.isRunning }

    func stop() async { await child.stop(grace: .seconds(3)) }
}
