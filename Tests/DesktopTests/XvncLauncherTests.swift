import AgentCore
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import Desktop

/// An X server killed without cleaning up leaves its lock file and socket behind; the
/// display must not be lost for good (a run of crash-recovery tests used up 10–199 here).
struct XvncLauncherTests {
    @Test func aStaleLockLeavesTheDisplayFree() throws {
        // The last display of the range, and only if nothing at all is there now.
        let display = 199
        let lock = "/tmp/.X\(display)-lock"
        guard !FileManager.default.fileExists(atPath: lock), !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(display)") else {
            return
        }
        defer { try? FileManager.default.removeItem(atPath: lock) }
        #expect(XvncLauncher.isFree(display))
        // A pid above any pid_max: no such process.
        try "\(Int32.max)\n".write(toFile: lock, atomically: false, encoding: .utf8)
        #expect(XvncLauncher.isFree(display), "a lock naming a process that is gone is stale")
        try "     \(getpid())\n".write(toFile: lock, atomically: false, encoding: .utf8)
        #expect(!XvncLauncher.isFree(display), "a lock naming a live process holds the display")
        try "not a pid\n".write(toFile: lock, atomically: false, encoding: .utf8)
        #expect(!XvncLauncher.isFree(display), "a lock that cannot be read as a pid holds the display")
        // A FIFO at the name (anyone can make one in /tmp) holds the display, and the look
        // returns at once: its open for reading had waited for a writer for ever.
        try FileManager.default.removeItem(atPath: lock)
        try #require(mkfifo(lock, 0o600) == 0)
        #expect(!XvncLauncher.isFree(display), "a FIFO at the lock's name holds the display")
        #expect(XvncLauncher.lockHolder(display) == nil)
    }

    /// An X server in another mount namespace that shares this network namespace shows only
    /// its abstract socket: the display is taken though no lock or socket file is there, and
    /// a start does not pick it (every try picked it again, and Xvnc exited with "server
    /// already running"); a display tried once is not tried again in the same start.
    @Test func anAbstractSocketHoldsTheDisplay() throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        // The first of 198 down to 190 that is free and stays ours: another test's look at a
        // display binds its name for a moment (a full run once met that at 198).
        let display = try #require(
            (190...198).reversed().first { display in
                XvncLauncher.isFree(display)
                    && UnixSocket.withAbstractAddress(Array("/tmp/.X11-unix/X\(display)".utf8)) { bind(fd, $0, $1) } == 0
            })
        try #require(listen(fd, 1) == 0)
        #expect(!XvncLauncher.isFree(display), "the abstract socket holds it")
        let next = XvncLauncher.freeDisplay(excluding: Set(10..<display))
        #expect(next.map { $0 > display } ?? true, "\(String(describing: next))")
        if let first = XvncLauncher.freeDisplay() {
            #expect(XvncLauncher.freeDisplay(excluding: [first]) != first, "a display tried is not tried again")
        }
    }
}
