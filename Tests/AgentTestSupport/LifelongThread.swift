import Foundation
import Synchronization

/// One thread that lives as long as the test process, running closures one at a time.
///
/// A child spawned here with a parent-death signal gets it when the test process ends (the
/// kernel sends it when the spawning *thread* exits), so daemons a hung or killed test run
/// leaves behind end with it instead of piling up on the host.
public enum LifelongThread {
    private static let queue = Mutex<[@Sendable () -> Void]>([])
    private static let ready = DispatchSemaphore(value: 0)
    private static let thread: Void = {
        let thread = Thread {
            while true {
                ready.wait()
                let job = queue.withLock { $0.isEmpty ? nil : $0.removeFirst() }
                job?()
            }
        }
        thread.name = "lifelong"
        thread.start()
    }()

    /// Runs `body` on the lifelong thread and waits for its result (keep it short: jobs
    /// run one after another).
    public static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        _ = thread
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        queue.withLock {
            $0.append {
                result.withLock { $0 = body() }
                done.signal()
            }
        }
        ready.signal()
        done.wait()
        return result.withLock { $0! }
    }
}
