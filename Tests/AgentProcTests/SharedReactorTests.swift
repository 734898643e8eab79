import AgentCore
@testable import AgentProc
import AgentTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The process API runs on the agent's one ``ChildReactor``: its processes' output and exits
/// are handled on the same thread as every other capability's children, and no thread of
/// its own exists.
@Suite struct SharedReactorTests {
    static let bound: Duration = .seconds(30)

    /// Names of this process's threads.
    static func threadNames() -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { tid in
            (try? String(contentsOfFile: "/proc/self/task/\(tid)/comm", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// Starts a process that exits once `gate` exists, and records the thread its exit is
    /// reported on.
    static func gatedExit(_ manager: ProcessManager, gate: String) async throws -> (UInt, ManagedProcess) {
        let process = try await manager.start(
            command: "while [ ! -e \(gate) ]; do sleep 0.01; done; echo out", workdir: nil, environment: nil,
            background: false, chat: nil)
        let thread = Mutex<UInt>(0)
        let exited = Latch()
        let registered = process.onExit {
            thread.withLock { $0 = UInt(pthread_self()) }
            exited.open()
        }
        #expect(registered != nil, "the process waits for its gate")
        #expect(FileManager.default.createFile(atPath: gate, contents: nil))
        #expect(await sleep(for: bound, orUntil: { await exited.wait() }) == .signalled)
        return (thread.withLock { $0 }, process)
    }

    static func reactorThread(_ reactor: ChildReactor) async -> UInt {
        await withCheckedContinuation { continuation in reactor.run { continuation.resume(returning: UInt(pthread_self())) } }
    }

    @Test func aManagerWatchesItsProcessesOnTheReactorItIsGiven() async throws {
        let directory = try makeTempDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let reactor = ChildReactor(name: "test-proc-given")
        var configuration = ProcessManager.Configuration(priority: .unchanged)
        configuration.shutdownGrace = .seconds(2)
        let manager = try ProcessManager(configuration: configuration, logger: Harness.quiet, reactor: reactor)
        #expect(manager.watcher.reactor === reactor)
        let (exitThread, process) = try await Self.gatedExit(manager, gate: directory + "/gate")
        #expect(exitThread == (await Self.reactorThread(reactor)))
        #expect(process.snapshot().output == Array("out\n".utf8), "output complete at exit")
        await manager.shutdown()
    }

    @Test func processesAndOtherChildrenShareTheOneReactorThread() async throws {
        let directory = try makeTempDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = ProcessManager.Configuration(priority: .unchanged)
        configuration.shutdownGrace = .seconds(2)
        let manager = try ProcessManager(configuration: configuration, logger: Harness.quiet)
        #expect(manager.watcher.reactor === ChildReactor.shared, "the default is the agent's reactor")
        let (processThread, _) = try await Self.gatedExit(manager, gate: directory + "/gate")

        // Another capability's child (a helper command) on the shared reactor.
        let result = await ChildCapture.run(
            ChildSpec(executable: "/bin/sh", arguments: ["/bin/sh", "-c", "echo helper"], environment: []),
            options: ChildCapture.Options(maxOutput: 1024, timeout: Self.bound))
        #expect(result.output == Array("helper\n".utf8))
        #expect(processThread == (await Self.reactorThread(.shared)))

        let names = Self.threadNames()
        #expect(names.filter { $0 == "agent-children" }.count == 1, "one shared reactor thread: \(names)")
        #expect(!names.contains { $0.hasPrefix("agent-proc-") }, "no thread of the process API's own (output, stdin)")
        await manager.shutdown()
    }

    /// A start lists its process a moment before the watcher has it (so that its exit always
    /// finds it listed): a signal in that moment reaches the running shell and its group,
    /// where it was answered 409 as if the process had exited.
    @Test func aProcessTheWatcherDoesNotHaveYetCanBeSignalled() async throws {
        var configuration = ProcessManager.Configuration(priority: .unchanged)
        configuration.shutdownGrace = .seconds(2)
        let manager = try ProcessManager(configuration: configuration, logger: Harness.quiet)
        let path = "/usr/bin:/bin"
        let child = try ProcessSpawner.spawn(
            SpawnRequest(command: "exec sleep 600", workdir: nil, environment: EnvironmentBlock(["PATH": path]), priority: .unchanged, childNofileSoft: nil),
            agentPath: path)
        defer {
            if OwnedChildren.signal(child.pid, SIGKILL, group: true) { OwnedChildren.reap(child.pid, wait: true) }
            close(child.pidfd)
            close(child.outputFD)
        }
        // The process as the start has it between listing it and handing it to the watcher.
        let process = ManagedProcess(
            id: "not-watched-yet", command: "exec sleep 600", workdir: "", background: false, chatID: nil, pid: child.pid,
            budget: manager.subscriberBudget)
        #expect(process.reactorToken == nil)
        #expect(throws: Never.self) { try manager.signal(process, .kill) }
        #expect(await eventually { ProcessWatcher.peekExit(child.pid)?.status.signal == "SIGKILL" })
        #expect(OwnedChildren.reap(child.pid) != nil)
        // Reaped: never signalled again (its pid may be someone else's by now).
        #expect(throws: ProcessManager.SignalFailure.notRunning) { try manager.signal(process, .kill) }
        await manager.shutdown()
    }
}
