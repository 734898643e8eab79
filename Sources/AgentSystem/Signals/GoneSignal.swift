/// Something a long wait races against, such as an HTTP client that may go away: a wait
/// registers what to do when it is gone and withdraws that when the wait ends, so a
/// connection that serves many waits holds one registration at a time, not one per wait.
public protocol GoneSignal: Sendable {
    /// Runs `action` once when the party is gone (at once if it already is), unless the
    /// returned registration is cancelled first.
    func whenGone(_ action: @escaping @Sendable () -> Void) -> GoneRegistration
}

/// A registration made with ``GoneSignal/whenGone(_:)``; cancelling it releases the action.
public struct GoneRegistration: Sendable {
    private let withdraw: @Sendable () -> Void

    public init(cancel: @escaping @Sendable () -> Void) {
        self.withdraw = cancel
    }

    /// A registration with nothing to withdraw (the action already ran).
    public static let none = GoneRegistration(cancel: {})

    public func cancel() { withdraw() }
}
