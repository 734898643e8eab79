import AgentCore
import AgentTestSupport
import Foundation
import Testing

@testable import AgentProc

/// Concurrent starts cannot pass the running-process limit together: each counts from its
/// admission (they had all passed the check before any of them ran).
@Suite(.timeLimit(.minutes(3)))
struct ProcessStartLimitTests {
    @Test func concurrentStartsStayWithinTheLimit() async throws {
        try await withProcessServer(configure: { $0.maxRunning = 3 }) { h in
            let started = await withTaskGroup(of: Bool.self) { group -> Int in
                for _ in 0..<24 {
                    group.addTask {
                        (try? await h.manager.start(command: "sleep 60", workdir: nil, environment: nil, background: false, chat: nil)) != nil
                    }
                }
                var count = 0
                for await ok in group where ok { count += 1 }
                return count
            }
            #expect(started == 3, "\(started) started")
        }
    }

    /// A start counts as starting until it is registered as running, and never as both: the
    /// start the limit leaves room for, admitted just after another's registration, is not
    /// refused (counted twice, the registered start took two places until its caller resumed).
    @Test func aRegisteredStartCountsOnce() throws {
        var state = ProcessManager.State()
        try state.admit("a", limit: 3)
        try state.admit("b", limit: 3)
        let budget = SubscriberBudget(maxSubscribers: 1, maxBytes: 1)
        state.register(ManagedProcess(id: "a", command: "true", workdir: "", background: false, chatID: nil, pid: 1, budget: budget))
        #expect(state.runningCount == 1 && state.starting == ["b"])
        #expect(throws: Never.self) { try state.admit("c", limit: 3) }
        #expect(throws: ProcessManager.StartFailure.tooManyProcesses(limit: 3)) { try state.admit("d", limit: 3) }
        // A start that failed before its registration frees its place; one registered already
        // is unaffected by its caller's end.
        state.startEnded("b")
        state.startEnded("a")
        #expect(state.runningCount == 1 && state.starting == ["c"])
        #expect(throws: Never.self) { try state.admit("d", limit: 3) }
        // An id in use, starting or running, is not admitted again.
        state.startEnded("d")
        #expect(throws: ProcessManager.StartFailure.spawn("process id c is taken")) { try state.admit("c", limit: 3) }
        #expect(throws: ProcessManager.StartFailure.spawn("process id a is taken")) { try state.admit("a", limit: 3) }
        #expect(state.starting == ["c"])
    }
}
