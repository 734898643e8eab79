import Synchronization

/// A flag one task sets and others read or wait for (stop a stress loop, release a client
/// that holds back, record that work ran).
public final class TestFlag: Sendable {
    private let value = Atomic<Bool>(false)

    public init() {}

    public func set() { value.store(true, ordering: .releasing) }

    public var isSet: Bool { value.load(ordering: .acquiring) }

    /// Waits until the flag is set or `timeout` passes (polls every 10 ms; bounded; time
    /// the poll could not run does not count: ``PollDeadline``).
    public func wait(upTo timeout: Duration = .seconds(60)) async {
        var deadline = PollDeadline(timeout)
        while !isSet, !deadline.hasPassed {
            await deadline.sleep(.milliseconds(10))
        }
    }
}
