import Dispatch
import Synchronization

/// Runs async code to its end from libFuzzer's synchronous callback (the main thread, not
/// one of the concurrency pool's, so waiting here starves nothing).
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let slot = ResultSlot<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        let value = await body()
        slot.value.withLock { $0 = value }
        done.signal()
    }
    done.wait()
    return slot.value.withLock { $0! }
}

/// Where the task leaves its result for the waiting thread.
private final class ResultSlot<T: Sendable>: Sendable {
    let value = Mutex<T?>(nil)
}
