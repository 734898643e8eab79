import Synchronization

/// A flag set once and read from any thread (a deadline that fired, a listener that bound, a
/// shutdown that began). Setting it releases what the setter wrote before; reading acquires it.
public final class OnceFlag: Sendable {
    private let value = Atomic<Bool>(false)

    public init() {}

    public func set() { value.store(true, ordering: .releasing) }
    public var isSet: Bool { value.load(ordering: .acquiring) }
}
