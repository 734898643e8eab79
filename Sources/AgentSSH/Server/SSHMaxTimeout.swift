/// What `--ssh-max-timeout` does to each SSH connection.
///
/// The reference turns a timeout of 3 s or more into keepalive (a `keepalive@openssh.com`
/// probe every timeout/3, the session closed after 3 unanswered) and a shorter one into an
/// absolute deadline. swift-nio-ssh cannot send a channel request of its own, so here a
/// timeout of 3 s or more closes a connection from which no byte arrived for that long
/// (a client with `ServerAliveInterval`, or any traffic, keeps it); a shorter one is the
/// reference's absolute deadline from the connection's start. Zero or less: neither.
enum SSHTimeoutRule: Sendable, Equatable {
    case none
    /// Closed this long after it opened, whatever happens.
    case absolute(Duration)
    /// Closed once this long passed with nothing received.
    case silence(Duration)

    /// From here on the reference keeps connections alive instead of cutting them.
    static let keepaliveThreshold: Duration = .seconds(3)
    /// The flag's default, as in the reference.
    static let defaultTimeout: Duration = .seconds(72 * 3600)

    init(maxTimeout: Duration) {
        if maxTimeout >= Self.keepaliveThreshold {
            self = .silence(maxTimeout)
        } else if maxTimeout > .zero {
            self = .absolute(maxTimeout)
        } else {
            self = .none
        }
    }
}

/// One connection's timeout as a plain value over an injected clock's instants: told when
/// bytes arrive, asked what to do when its timer fires.
struct SSHConnectionTimeout<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Action: Equatable {
        /// Close the connection: its time is up.
        case close
        /// Check again at this instant.
        case wake(at: Instant)
        /// No timer (no rule).
        case idle
    }

    let rule: SSHTimeoutRule
    private let opened: Instant
    private var lastReceived: Instant

    init(rule: SSHTimeoutRule, openedAt now: Instant) {
        self.rule = rule
        opened = now
        lastReceived = now
    }

    /// Bytes arrived from the client at `now` (only the silence rule cares).
    mutating func received(at now: Instant) {
        if lastReceived < now { lastReceived = now }
    }

    /// When the connection's time is up if nothing else arrives; nil without a rule.
    var deadline: Instant? {
        switch rule {
        case .none: return nil
        case .absolute(let timeout): return opened.advanced(by: timeout)
        case .silence(let timeout): return lastReceived.advanced(by: timeout)
        }
    }

    /// What to do at `now` (at the start, and whenever the timer fires).
    func check(at now: Instant) -> Action {
        guard let deadline else { return .idle }
        return now < deadline ? .wake(at: deadline) : .close
    }
}
