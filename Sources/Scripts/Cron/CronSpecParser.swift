/// Reads a cron spec as robfig/cron v3.0.1's parser does with `Second | Minute | Hour | Dom |
/// Month | DowOptional`, plus descriptors. Differences, all more lenient or safer: the spec
/// is trimmed first (robfig trims only after a zone prefix), `@every` may be followed by
/// any whitespace, a zone prefix without a schedule is an error (robfig panics), and a field
/// with no values at all (`,`) is an error (robfig accepts it and never fires).
enum CronSpecParser {
    struct Parsed {
        var kind: CronSchedule.Kind
        var zone: ZoneInfo
        var warning: String?
    }

    typealias Scalars = Substring.UnicodeScalarView

    static let secondsFirst: [CronFields.Kind] = [.second, .minute, .hour, .dayOfMonth, .month, .dayOfWeek]
    static let unixOrder: [CronFields.Kind] = [.minute, .hour, .dayOfMonth, .month, .dayOfWeek]

    static func parse(_ spec: String, localZone: ZoneInfo?) throws(CronError) -> Parsed {
        let length = spec.utf8.count
        guard length <= CronSchedule.maxSpecBytes else {
            throw CronError(
                "cron spec \(CronError.quoted(spec, limit: 40)) is too long: \(length) bytes, at most \(CronSchedule.maxSpecBytes)")
        }
        let shown = CronError.quoted(spec)
        func failure(_ reason: String) -> CronError { CronError("cron \(shown): \(reason)") }

        var rest = trimmed(spec[...].unicodeScalars)
        guard !rest.isEmpty else { throw CronError("empty cron spec \(shown)") }

        // A zone prefix: up to the first space (as robfig: a space, not any whitespace).
        var zone: ZoneInfo?
        var zonePrefix = ""
        if starts(rest, with: "TZ=") || starts(rest, with: "CRON_TZ=") {
            guard let equals = rest.firstIndex(of: "="), let space = rest.firstIndex(of: " ") else {
                throw failure("a time zone but no schedule after it")
            }
            let name = String(Substring(rest[rest.index(after: equals)..<space]))
            do {
                zone = try ZoneInfo.named(name)
            } catch {
                throw failure(error.description)
            }
            zonePrefix = String(Substring(rest[...space]))
            rest = trimmed(rest[space...])
        }
        let scheduleZone = zone ?? localZone ?? ZoneInfo.local

        if rest.first == "@" {
            return Parsed(kind: try descriptor(rest, failure: failure), zone: scheduleZone, warning: nil)
        }

        let fields = rest.split(whereSeparator: { $0.properties.isWhitespace }).map { Substring($0) }
        guard fields.count == 5 || fields.count == 6 else {
            throw failure(
                "expected 5 or 6 fields (second minute hour day-of-month month [day-of-week]), found \(fields.count)")
        }
        var bits: [UInt64] = []
        for (field, kind) in zip(fields, secondsFirst) {
            do {
                bits.append(try CronFields.parse(field, as: kind))
            } catch {
                throw failure("\(kind.name) field \(CronError.quoted(field, limit: 40)): \(error.reason)")
            }
        }
        if bits.count == 5 { bits.append(all(.dayOfWeek)) }
        let parsed = CronFields(
            second: bits[0], minute: bits[1], hour: bits[2], dayOfMonth: bits[3], month: bits[4], dayOfWeek: bits[5])

        var warning: String?
        if fields.count == 5, readsAsUnixCrontab(fields) {
            let suggestion = zonePrefix + "0 " + String(Substring(rest))
            warning =
                "cron \(shown) has 5 fields and is read seconds first (second minute hour day-of-month month): "
                + "it runs every matching second, not minute; prefix it with \"0 \" for a minute-based schedule "
                + "(\(CronError.quoted(suggestion)))"
        }
        return Parsed(kind: .fields(parsed), zone: scheduleZone, warning: warning)
    }

    /// Whether five fields also parse as minute, hour, day of month, month, day of week.
    static func readsAsUnixCrontab(_ fields: [Substring]) -> Bool {
        for (field, kind) in zip(fields, unixOrder) {
            do {
                _ = try CronFields.parse(field, as: kind)
            } catch {
                return false
            }
        }
        return true
    }

    static func descriptor(_ text: Scalars, failure: (String) -> CronError) throws(CronError) -> CronSchedule.Kind {
        let midnight = CronFields(
            second: 1, minute: 1, hour: 1, dayOfMonth: all(.dayOfMonth), month: all(.month), dayOfWeek: all(.dayOfWeek))
        switch String(Substring(text)) {
        case "@yearly", "@annually":
            var fields = midnight
            fields.dayOfMonth = 1 << 1
            fields.month = 1 << 1
            return .fields(fields)
        case "@monthly":
            var fields = midnight
            fields.dayOfMonth = 1 << 1
            return .fields(fields)
        case "@weekly":
            var fields = midnight
            fields.dayOfWeek = 1 << 0
            return .fields(fields)
        case "@daily", "@midnight":
            return .fields(midnight)
        case "@hourly":
            var fields = midnight
            fields.hour = all(.hour)
            return .fields(fields)
        default:
            break
        }
        let every = "@every"
        if starts(text, with: every), let next = text.dropFirst(every.unicodeScalars.count).first,
            next.properties.isWhitespace
        {
            let duration = Substring(trimmed(text.dropFirst(every.unicodeScalars.count)))
            let nanoseconds: Int64
            do {
                nanoseconds = try CronDuration.nanoseconds(duration)
            } catch {
                throw failure("bad duration \(CronError.quoted(duration, limit: 40)) after @every: \(error.reason)")
            }
            // robfig's Every: below one second is one second; the rest is cut to whole seconds.
            return .every(seconds: max(1, nanoseconds / 1_000_000_000))
        }
        throw failure(
            "unknown descriptor (known: @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly, @every <duration>)")
    }

    /// Every value of a field, with the star bit.
    static func all(_ kind: CronFields.Kind) -> UInt64 {
        var bits: UInt64 = 0
        for value in kind.range { bits |= 1 << UInt64(value) }
        return bits | CronFields.star
    }

    static func starts(_ scalars: Scalars, with prefix: String) -> Bool {
        scalars.starts(with: prefix.unicodeScalars)
    }

    static func trimmed(_ scalars: Scalars) -> Scalars {
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return scalars[scalars.endIndex...] }
        return scalars[first...last]
    }
}
