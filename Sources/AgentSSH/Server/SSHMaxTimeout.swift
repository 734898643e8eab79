/// What `--ssh-max-timeout` does to each SSH connection.
///
/// As in the reference, a timeout of 3 s or more is keepalive: after timeout/3 with nothing
/// from the client the agent sends a `keepalive@openssh.com` request (which any live client
/// answers), again after 2/3, and closes the connection once the whole timeout passed in
/// silence. The reference probes each session channel; the agent probes the connection (a
/// global request), so a connection with only forwards is kept alive too. A shorter timeout
/// is the reference's absolute deadline from the connection's start. Zero or less: neither.
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

/// One connection's timeouts as a plain value over an injected clock's instants: told when
/// bytes arrive, when it probed and when the client authenticated, asked what to do when its
/// timer fires. Besides ``SSHTimeoutRule`` a connection has until its handshake deadline to
/// authenticate (OpenSSH's LoginGraceTime), so one that never does is not held for the rule's
/// days.
struct SSHConnectionTimeout<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Action: Equatable {
        /// Close the connection: its time is up.
        case close
        /// Close the connection: it did not authenticate in time.
        case closeUnauthenticated
        /// Send a keepalive probe now (then call ``probed()`` and check again).
        case probe
        /// Check again at this instant.
        case wake(at: Instant)
        /// No timer (no rule).
        case idle
    }

    /// Probes sent in one silence before it closes (at 1/3 and 2/3 of the timeout).
    static var probesPerSilence: Int { 2 }

    let rule: SSHTimeoutRule
    private let opened: Instant
    private var lastReceived: Instant
    private var probes = 0
    /// Until authentication (nil without a handshake limit, and after it).
    private(set) var handshakeDeadline: Instant?

    init(rule: SSHTimeoutRule, handshake: Duration? = nil, openedAt now: Instant) {
        self.rule = rule
        opened = now
        lastReceived = now
        handshakeDeadline = handshake.map { now.advanced(by: $0) }
    }

    /// The client authenticated: the handshake deadline no longer applies.
    mutating func authenticated() { handshakeDeadline = nil }

    /// Bytes arrived from the client at `now` (only the silence rule cares).
    mutating func received(at now: Instant) {
        if lastReceived < now {
            lastReceived = now
            probes = 0
        }
    }

    /// A probe went out.
    mutating func probed() { probes += 1 }

    /// When the connection's time is up if nothing else arrives; nil without a rule.
    var deadline: Instant? {
        switch rule {
        case .none: return nil
        case .absolute(let timeout): return opened.advanced(by: timeout)
        case .silence(let timeout): return lastReceived.advanced(by: timeout)
        }
    }

    /// When the next probe is due in this silence; nil when none is left (or no keepalive).
    var nextProbe: Instant? {
        guard case .silence(let timeout) = rule, probes < Self.probesPerSilence else { return nil }
        return lastReceived.advanced(by: timeout / 3 * (probes + 1))
    }

    /// What to do at `now` (at the start, and whenever the timer fires).
    func check(at now: Instant) -> Action {
        guard let handshake = handshakeDeadline else { return checkRule(at: now) }
        if now >= handshake { return .closeUnauthenticated }
        switch checkRule(at: now) {
        case .close: return .close
        case .closeUnauthenticated: return .closeUnauthenticated
        case .probe: return .probe
        case .wake(let instant): return .wake(at: min(instant, handshake))
        case .idle: return .wake(at: handshake)
        }
    }

    private func checkRule(at now: Instant) -> Action {
        guard let deadline else { return .idle }
        if now >= deadline { return .close }
        guard let probe = nextProbe else { return .wake(at: deadline) }
        return now >= probe ? .probe : .wake(at: probe)
    }
}
