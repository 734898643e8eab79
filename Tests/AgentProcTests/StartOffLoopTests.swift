import AgentCore
@testable import AgentProc
import AgentTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A start's blocking work (the clone and exec, the records' writes, a tool call's sync)
/// never runs on an event loop or Swift's cooperative pool: inline on the HTTP handler pool's
/// thread that runs `POST /start`, else on the manager's start pool.
@Suite struct StartOffLoopTests {
    /// The name of the calling thread.
    static func threadName() -> String {
        let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?"
        return comm.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func startsAndToolCallClaimsRunInlineOnTheHandlersPoolThread() async throws {
        let state = try makeTempDirectory()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let threads = Mutex<[(name: String, mayBlock: Bool)]>([])
        try await withProcessServer(configure: {
            $0.stateDirectory = state
            $0.onStartWork = { threads.withLock { $0.append((Self.threadName(), BlockingThread.isCurrent)) } }
        }) { h in
            let id = try await h.start("echo plain")
            #expect(try await h.finalOutput(id)["output"] as? String == "plain\n")
            let headers = [
                ("Coder-Chat-Id", UUID().uuidString.lowercased()), ("Coder-Tool-Call-Message-Id", "3"),
                ("Coder-Tool-Call-Id", "call_off_loop"), ("Coder-Tool-Call-Age-Ms", "0"),
            ]
            let response = try await h.client.request(
                "POST", "/api/v0/processes/start", headers: headers, body: Array(#"{"command":"echo tool"}"#.utf8),
                timeout: .seconds(60))
            #expect(response.status == 200)
        }
        let seen = threads.withLock { $0 }
        // The plain start, then the tool call's claim and its start.
        #expect(seen.count == 3)
        // On the handler's own pool thread (no hop to the start pool), never on a loop.
        #expect(seen.allSatisfy { $0.mayBlock && $0.name != "blk-proc-start" && !$0.name.hasPrefix("NIO-") }, "start work ran on \(seen)")
    }

    @Test func aStartFromATaskOnTheCooperativePoolRunsOnTheStartPool() async throws {
        let seen = Mutex<[(name: String, mayBlock: Bool)]>([])
        var configuration = ProcessManager.Configuration(priority: .unchanged)
        configuration.onStartWork = { seen.withLock { $0.append((Self.threadName(), BlockingThread.isCurrent)) } }
        let manager = try ProcessManager(configuration: configuration, logger: Harness.quiet)
        let runner = Task { try await manager.run() }
        defer { runner.cancel() }
        #expect(!BlockingThread.isCurrent)
        let process = try await manager.start(command: "true", workdir: nil, environment: nil, background: false, chat: nil)
        #expect(await eventually { !process.isRunning })
        let threads = seen.withLock { $0 }
        #expect(threads.count == 1)
        #expect(threads.allSatisfy { $0.mayBlock && $0.name == "blk-proc-start" }, "start work ran on \(threads)")
        await manager.shutdown()
    }

    @Test func aStartFromManyTasksAtOnceAllRunAndAreWatched() async throws {
        var configuration = ProcessManager.Configuration(priority: .unchanged)
        configuration.shutdownGrace = .seconds(2)
        let manager = try ProcessManager(configuration: configuration, logger: Harness.quiet)
        let runner = Task { try await manager.run() }
        defer { runner.cancel() }
        // More starts at once than the pool has threads: they queue and each runs once.
        let ids = try await withThrowingTaskGroup(of: String.self) { group in
            for n in 0..<16 {
                group.addTask {
                    try await manager.start(command: "echo \(n)", workdir: nil, environment: nil, background: false, chat: nil).id
                }
            }
            var ids: Set<String> = []
            for try await id in group { ids.insert(id) }
            return ids
        }
        #expect(ids.count == 16)
        for id in ids {
            let process = try #require(manager.lookup(id, chat: nil))
            #expect(await eventually { !process.isRunning })
        }
        await manager.shutdown()
    }
}
