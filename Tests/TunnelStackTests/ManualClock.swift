import NIOCore
import Synchronization

/// A clock the test moves by hand (for the UDP idle timeout).
final class ManualClock: Sendable {
    private let current = Mutex(NIODeadline.uptimeNanoseconds(1_000_000_000))

    func now() -> NIODeadline { current.withLock { $0 } }
    func advance(by amount: TimeAmount) { current.withLock { $0 = $0 + amount } }
}
