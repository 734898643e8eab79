import AgentTestSupport
import Testing

/// The test-support trait that keeps long computing tests off Swift's cooperative pool:
/// bodies marked with it, synchronous or not, and their child tasks run on its own threads.
@Suite struct OwnThreadsTests {
    @Test(.ownThreads) func aSynchronousBodyRunsOnTheOwnThreads() {
        #expect(TestThreadExecutor.shared.runsOnCurrentThread)
    }

    @Test(.ownThreads) func anAsyncBodyAndItsChildTasksRunOnTheOwnThreads() async {
        #expect(TestThreadExecutor.shared.runsOnCurrentThread)
        try? await Task.sleep(for: .milliseconds(1))
        #expect(TestThreadExecutor.shared.runsOnCurrentThread)
        let child = await withTaskGroup(of: Bool.self) { group in
            group.addTask { TestThreadExecutor.shared.runsOnCurrentThread }
            return await group.next() ?? false
        }
        #expect(child)
    }

    @Test func unmarkedTestsStayOnThePool() {
        #expect(!TestThreadExecutor.shared.runsOnCurrentThread)
    }
}
