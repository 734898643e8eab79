import AgentSystem
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A signal to a child's group reaches the child itself also when it left its group (set
/// its process group to its parent's) while a grandchild keeps the group alive: the group's
/// signal went to the grandchild alone, and the child lived on.
@Suite(.timeLimit(.minutes(2)))
struct ChildSignalTests {
    @Test func aChildThatLeftItsGroupIsSignalledToo() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            print("skipped: /usr/bin/python3 is missing")
            return
        }
        let directory = NSTemporaryDirectory() + "child-signal-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let marker = directory + "/left"
        // The grandchild stays in the child's group; the child joins its parent's group.
        let script = """
            import os, time
            if os.fork() == 0:
                time.sleep(60)
            else:
                os.setpgid(0, os.getpgid(os.getppid()))
                open("\(marker)", "w").close()
                time.sleep(60)
            """
        let reactor = ChildReactor(name: "test-signal")
        let child = try reactor.spawn(
            ChildSpec(executable: "/usr/bin/python3", arguments: ["/usr/bin/python3", "-c", script], environment: [], grouping: .newGroup))
        // Bounded: 30 s for python to start on a loaded host.
        for _ in 0..<600 where !FileManager.default.fileExists(atPath: marker) { try await Task.sleep(for: .milliseconds(50)) }
        #expect(FileManager.default.fileExists(atPath: marker))
        #expect(getpgid(child.pid) != child.pid, "the child left its group")
        #expect(child.signal(SIGKILL, to: .group))
        #expect(await child.exited(within: .seconds(30)) != nil, "the child got the signal")
    }
}
