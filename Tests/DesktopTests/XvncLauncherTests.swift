import Foundation
import Testing

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
    }
}
