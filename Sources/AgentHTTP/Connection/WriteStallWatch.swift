/// What one look at a blocked socket finds, for the write-stall deadline: the socket took
/// data since the last look (the client reads, slowly), or the look came late (the loop, not
/// the client, was held up: a loop busy past the deadline runs the overdue wake-up before it
/// polls the socket again, so a client that kept reading would be closed for the loop's
/// delay), or neither. Sans-IO: bytes and instants come in, a verdict goes out.
struct WriteStallWatch<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Verdict: Equatable, Sendable {
        /// Fewer bytes wait than at the last look: the deadline starts again from now.
        case progressed
        /// Nothing went out, and the look came this long after it was due: the deadline
        /// moves by as much (time the loop could not look is not the client's).
        case late(Duration)
        /// Nothing went out, and the look came on time.
        case stalled
    }

    /// Bytes waiting at the last look; nil when the channel cannot say.
    private var mark: Int?
    /// When the wake-up now scheduled is due.
    private var lookDue: Instant?

    /// A wake-up was scheduled for `lookAt`, with `buffered` bytes waiting.
    mutating func scheduled(buffered: Int?, lookAt: Instant) {
        mark = buffered
        lookDue = lookAt
    }

    /// The wake-up ran at `now` and found `buffered` bytes waiting (which become the mark).
    mutating func look(buffered: Int?, now: Instant) -> Verdict {
        defer {
            mark = buffered
            lookDue = nil
        }
        if let buffered, let mark, buffered < mark { return .progressed }
        if let lookDue, lookDue < now { return .late(lookDue.duration(to: now)) }
        return .stalled
    }
}
