import Synchronization

/// A flag one task sets and others read or wait for (stop a stress loop, release a client
/// that holds back, record that work ran).
public final class TestFlag: Sendable {
    private let value = Atomic<Bool>(false)

    public init() {}

    public func set() { value.store(true, ordering: .releasing) }

    public var isSet: Bool { value.load(ordering: .acquiring) }

    /// Waits until the flag is set or `timeout` passes (polls every 10 ms; bounded).
    public func wait(upTo timeout: Duration = .seconds(60)) async {
        let deadline = ContinuousClock.now + timeout
        while !isSet, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}
