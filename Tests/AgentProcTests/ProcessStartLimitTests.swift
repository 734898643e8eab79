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
}
