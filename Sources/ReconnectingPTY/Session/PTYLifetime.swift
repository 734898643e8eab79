/// When a PTY session ends for want of attachments, as a plain value: a timer of
/// `attachTimeout` armed at creation (the first connection's attach disarms it), none while
/// any connection is attached, and one of `idleTimeout` armed when the last one detaches.
/// Each arming has a generation; a timer that fires for an older generation does nothing, so
/// the driver never cancels timers, it only arms new ones.
struct PTYLifetime: Sendable {
    /// The reference's: 30 s for the first attach, 5 min after the last detach.
    static let defaultAttachTimeout: Duration = .seconds(30)
    static let defaultIdleTimeout: Duration = .seconds(300)

    enum Action: Equatable, Sendable {
        case none
        /// Arm a timer that calls ``timerFired(generation:)`` after the duration.
        case arm(Duration, generation: Int)
        /// The session has outlived its time: end it.
        case expire
    }

    let attachTimeout: Duration
    let idleTimeout: Duration
    private(set) var attachments = 0
    private(set) var generation = 0
    private(set) var expired = false

    init(attachTimeout: Duration = Self.defaultAttachTimeout, idleTimeout: Duration = Self.defaultIdleTimeout) {
        self.attachTimeout = attachTimeout
        self.idleTimeout = idleTimeout
    }

    /// The timer to arm when the session is created.
    var start: Action { .arm(attachTimeout, generation: generation) }

    mutating func attach() -> Action {
        guard !expired else { return .none }
        attachments += 1
        generation += 1
        return .none
    }

    mutating func detach() -> Action {
        guard !expired, attachments > 0 else { return .none }
        attachments -= 1
        guard attachments == 0 else { return .none }
        generation += 1
        return .arm(idleTimeout, generation: generation)
    }

    mutating func timerFired(generation fired: Int) -> Action {
        guard !expired, fired == generation, attachments == 0 else { return .none }
        expired = true
        return .expire
    }
}

extension PTYLifetime.Action {
    /// Carries the action out for a session: an arming as a task that waits `duration` with
    /// `sleep` and then hands its generation to `fired` (nothing if the wait throws), returned
    /// so that the caller cancels it when it re-arms or ends; the expiry by calling `expire`.
    @discardableResult
    func run(
        sleep: @escaping @Sendable (Duration) async throws -> Void, fired: @escaping @Sendable (Int) -> Void, expire: () -> Void
    ) -> Task<Void, Never>? {
        switch self {
        case .none:
            return nil
        case .arm(let duration, let generation):
            return Task {
                guard (try? await sleep(duration)) != nil else { return }
                fired(generation)
            }
        case .expire:
            expire()
            return nil
        }
    }
}
