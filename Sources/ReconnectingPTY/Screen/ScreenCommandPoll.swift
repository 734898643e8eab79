/// How a screen command is retried, as a plain value (the reference's): run at once, then
/// every ``interval`` until it succeeds or ``limit`` has passed since the first run. The
/// session's screen answers `version` once its daemon is up; `quit` is retried the same way.
struct ScreenCommandPoll: Sendable, Equatable {
    static let interval: Duration = .milliseconds(250)
    static let limit: Duration = .seconds(30)

    enum Step: Equatable, Sendable {
        /// Run the command again after this pause.
        case retry(after: Duration)
        /// The limit has passed: give up.
        case giveUp
    }

    /// Pauses taken so far.
    private(set) var waited: Duration = .zero

    /// After a run that did not succeed.
    mutating func failed() -> Step {
        guard waited + Self.interval <= Self.limit else { return .giveUp }
        waited += Self.interval
        return .retry(after: Self.interval)
    }
}
