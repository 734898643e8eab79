import FoundationEssentials

/// A `coder_script` cron schedule, in the dialect Coder's agent reads it with robfig/cron
/// v3 (`Second | Minute | Hour | Dom | Month | DowOptional`): SECONDS FIRST, then minute,
/// hour, day of month, month and an optional day of week, so `*/5 * * * *` runs every five
/// seconds. An optional `TZ=<zone> ` or `CRON_TZ=<zone> ` prefix picks the zone (else the
/// agent's local zone). Beyond the reference, the descriptors `@yearly`/`@annually`,
/// `@monthly`, `@weekly`, `@daily`/`@midnight`, `@hourly` and `@every <Go duration>` work.
public struct CronSchedule: Sendable, Equatable {
    /// The spec as given.
    public let spec: String
    /// Non-nil for a 5-field spec that also reads as a Unix minute crontab (minute hour
    /// day-of-month month day-of-week): a hint that it probably does not mean what it does.
    public let warning: String?

    enum Kind: Sendable, Equatable {
        case fields(CronFields)
        /// `@every`: this many seconds after the asked time (whole seconds, at least one).
        case every(seconds: Int64)
    }

    let kind: Kind
    let zone: ZoneInfo

    static let maxSpecBytes = 1024

    /// `localZone` is the zone for a spec without a `TZ=` prefix; nil means ``ZoneInfo/local``.
    public init(parsing spec: String, localZone: ZoneInfo? = nil) throws(CronError) {
        self.spec = spec
        let parsed = try CronSpecParser.parse(spec, localZone: localZone)
        kind = parsed.kind
        zone = parsed.zone
        warning = parsed.warning
    }

    /// Next activation strictly after `date` (whole seconds), nil when none within 5 years.
    /// For `@every`, the activation is `date` (cut to the second) plus the interval, as
    /// robfig's `ConstantDelaySchedule`, however far that is.
    public func next(after date: Date) -> Date? {
        let seconds = date.timeIntervalSince1970
        // About ±31,700 years: beyond it no answer is useful, and the arithmetic stays small.
        guard seconds.isFinite, abs(seconds) < 1e12 else { return nil }
        let instant = Int64(seconds.rounded(.down))
        switch kind {
        case .every(let interval):
            return Date(timeIntervalSince1970: Double(instant + interval))
        case .fields(let fields):
            var budget = CronFields.stepBudget
            guard let found = fields.next(after: instant, in: zone, budget: &budget) else { return nil }
            if found > instant, fields.matches(zone.civil(at: found)) {
                return Date(timeIntervalSince1970: Double(found))
            }
            // Robfig's search misread a DST change (it can answer a time that does not match,
            // or one not after the asked time): the first matching second instead.
            return fields.exactNext(after: instant, in: zone, budget: &budget).map { Date(timeIntervalSince1970: Double($0)) }
        }
    }
}
