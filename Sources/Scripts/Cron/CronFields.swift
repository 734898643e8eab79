/// The six fields of a cron spec as bit sets (bit n set: value n matches), in robfig/cron
/// v3's form: bit 63 is the "star bit", set when the field was `*` or `?` (also `*/1`), which
/// decides how day of month and day of week combine.
struct CronFields: Sendable, Equatable {
    var second: UInt64
    var minute: UInt64
    var hour: UInt64
    var dayOfMonth: UInt64
    var month: UInt64
    var dayOfWeek: UInt64

    static let star: UInt64 = 1 << 63

    /// What one field accepts.
    struct Kind: Sendable {
        var name: String
        var range: ClosedRange<Int>
        /// Lower-case three-letter names; `names[i]` stands for `nameBase + i`.
        var names: [String]
        var nameBase: Int
        var nameNoun: String

        static let second = Kind(name: "second", range: 0...59, names: [], nameBase: 0, nameNoun: "")
        static let minute = Kind(name: "minute", range: 0...59, names: [], nameBase: 0, nameNoun: "")
        static let hour = Kind(name: "hour", range: 0...23, names: [], nameBase: 0, nameNoun: "")
        static let dayOfMonth = Kind(name: "day-of-month", range: 1...31, names: [], nameBase: 0, nameNoun: "")
        static let month = Kind(
            name: "month", range: 1...12,
            names: ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
            nameBase: 1, nameNoun: "month name")
        static let dayOfWeek = Kind(
            name: "day-of-week", range: 0...6, names: ["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
            nameBase: 0, nameNoun: "day name")

        /// The value of a name, compared ignoring ASCII case.
        func value(named text: ArraySlice<UInt8>) -> Int? {
            guard text.count == 3 else { return nil }
            let lowered = text.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 + 32 : $0 }
            return names.firstIndex { $0.utf8.elementsEqual(lowered) }.map { $0 + nameBase }
        }
    }

    /// Why a field was refused (the caller adds the spec and the field).
    struct Problem: Error {
        var reason: String
    }

    /// A field: a comma-separated list of `*`, `?`, `n`, `a-b`, each optionally `/step`.
    /// As robfig: empty list items are skipped, `n/step` means `n-max/step`, a step above 1
    /// clears the star bit, and after `*` anything from a `-` on is ignored (`*-5` is `*`).
    static func parse(_ field: Substring, as kind: Kind) throws(Problem) -> UInt64 {
        let items = Array(field.utf8).split(separator: UInt8(ascii: ","))
        guard !items.isEmpty else { throw Problem(reason: "no values") }
        var bits: UInt64 = 0
        for item in items {
            bits |= try parseRange(item, as: kind)
        }
        return bits
    }

    static func parseRange(_ item: ArraySlice<UInt8>, as kind: Kind) throws(Problem) -> UInt64 {
        let rangeAndStep = item.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        let lowAndHigh = rangeAndStep[0].split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        let text = String(decoding: item, as: UTF8.self)
        var start: Int
        var end: Int
        var star: UInt64 = 0
        if lowAndHigh[0].elementsEqual("*".utf8) || lowAndHigh[0].elementsEqual("?".utf8) {
            start = kind.range.lowerBound
            end = kind.range.upperBound
            star = Self.star
        } else {
            start = try number(lowAndHigh[0], kind: kind, names: true)
            switch lowAndHigh.count {
            case 1: end = start
            case 2: end = try number(lowAndHigh[1], kind: kind, names: true)
            default: throw Problem(reason: "too many hyphens in \(CronError.quoted(text))")
            }
        }
        var step = 1
        switch rangeAndStep.count {
        case 1: break
        case 2:
            step = try number(rangeAndStep[1], kind: kind, names: false)
            if lowAndHigh.count == 1 { end = kind.range.upperBound }
            if step > 1 { star = 0 }
        default: throw Problem(reason: "too many slashes in \(CronError.quoted(text))")
        }
        guard start >= kind.range.lowerBound else {
            throw Problem(reason: "\(start) is below the minimum \(kind.range.lowerBound)")
        }
        guard end <= kind.range.upperBound else {
            throw Problem(reason: "\(end) is above the maximum \(kind.range.upperBound)")
        }
        guard start <= end else { throw Problem(reason: "the range \(CronError.quoted(text)) starts after it ends") }
        guard step > 0 else { throw Problem(reason: "the step in \(CronError.quoted(text)) must be a positive number") }
        var bits: UInt64 = 0
        var value = start
        while true {
            bits |= 1 << UInt64(value)
            guard step <= end - value else { break }
            value += step
        }
        return bits | star
    }

    /// A name (when allowed) or a decimal number as Go's `strconv.Atoi` reads it (an
    /// optional sign, digits only); negative numbers are refused.
    static func number(_ text: ArraySlice<UInt8>, kind: Kind, names: Bool) throws(Problem) -> Int {
        if names, let value = kind.value(named: text) { return value }
        let shown = CronError.quoted(String(decoding: text, as: UTF8.self), limit: 40)
        var digits = text
        var negative = false
        if let sign = digits.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
            negative = sign == UInt8(ascii: "-")
            digits = digits.dropFirst()
        }
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            let expected = names && !kind.nameNoun.isEmpty ? "a number or a \(kind.nameNoun)" : "a number"
            throw Problem(reason: text.isEmpty ? "a value is missing (expected \(expected))" : "\(shown) is not \(expected)")
        }
        var value = 0
        for digit in digits {
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(Int(digit - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { throw Problem(reason: "\(shown) is out of range") }
            value = sum
        }
        if negative, value != 0 { throw Problem(reason: "negative number \(shown) not allowed") }
        return value
    }

    /// Robfig's day rule: when either day field has the star bit, both must match; otherwise
    /// either may.
    func dayMatches(_ time: CivilTime) -> Bool {
        let domMatch = dayOfMonth & (1 << UInt64(time.day)) != 0
        let dowMatch = dayOfWeek & (1 << UInt64(time.weekday)) != 0
        if (dayOfMonth | dayOfWeek) & Self.star != 0 { return domMatch && dowMatch }
        return domMatch || dowMatch
    }

    /// Whether a wall-clock reading matches every field.
    func matches(_ time: CivilTime) -> Bool {
        second & (1 << UInt64(time.second)) != 0 && matchesMinute(time)
    }

    func matchesMinute(_ time: CivilTime) -> Bool {
        minute & (1 << UInt64(time.minute)) != 0 && hour & (1 << UInt64(time.hour)) != 0
            && month & (1 << UInt64(time.month)) != 0 && dayMatches(time)
    }

    /// The first second after `instant` whose wall clock in `zone` matches, exactly: real
    /// time is cut into spans of one UTC offset, and in each the search runs on the plain
    /// calendar (where robfig's search is right). For where robfig's own answer is wrong
    /// around a DST change. nil when nothing matches within five years.
    func exactNext(after instant: Int64, in zone: ZoneInfo, budget: inout Int) -> Int64? {
        var spanStart = instant + 1
        let yearLimit = zone.civil(at: spanStart).year + 5
        while budget > 0 {
            budget -= 1
            let offset = Int64(zone.offset(at: spanStart))
            let spanEnd = zone.nextChange(after: spanStart)
            guard let local = next(after: spanStart + offset - 1, in: .utc, budget: &budget) else { return nil }
            let found = local - offset
            if found < spanEnd { return found }
            guard spanEnd < .max, zone.civil(at: spanEnd).year <= yearLimit else { return nil }
            spanStart = spanEnd
        }
        return nil
    }

    /// Steps one `next` may take before giving up (far above what five years need: at most a
    /// few thousand).
    static let stepBudget = 200_000

    /// The first matching second after `instant` (UTC seconds, whole), robfig/cron v3's
    /// `SpecSchedule.Next`: the wall clock in `zone` is compared field by field, month first;
    /// the first field that does not match is advanced (resetting the smaller ones once), and
    /// a wrap-around starts the comparison over. Hours, minutes and seconds advance in real
    /// time, so an hour that a DST gap skips is skipped (a job at 02:30 does not run on that
    /// day) and an hour a DST overlap repeats matches twice. nil after five years.
    func next(after instant: Int64, in zone: ZoneInfo, budget: inout Int) -> Int64? {
        var t = instant + 1
        var added = false
        let yearLimit = zone.civil(at: t).year + 5

        func date(_ year: Int, _ month: Int, _ day: Int, _ hour: Int) -> Int64 {
            zone.instant(localSeconds: CivilTime.localSeconds(year: year, month: month, day: day, hour: hour, minute: 0, second: 0))
        }

        search: while true {
            var now = zone.civil(at: t)
            if now.year > yearLimit { return nil }

            while month & (1 << UInt64(now.month)) == 0 {
                budget -= 1
                guard budget > 0 else { return nil }
                if !added {
                    added = true
                    t = date(now.year, now.month, 1, 0)
                    now = zone.civil(at: t)
                }
                // Go's AddDate(0, 1, 0): the same wall clock a month on, normalised.
                let before = t
                t = zone.instant(
                    localSeconds: CivilTime.localSeconds(
                        year: now.year, month: now.month + 1, day: now.day, hour: now.hour, minute: now.minute,
                        second: now.second))
                if t <= before { t = before + 86_400 }  // never backwards (robfig could loop forever)
                now = zone.civil(at: t)
                if now.month == 1 { continue search }
            }

            while !dayMatches(now) {
                budget -= 1
                guard budget > 0 else { return nil }
                if !added {
                    added = true
                    t = date(now.year, now.month, now.day, 0)
                    now = zone.civil(at: t)
                }
                let before = t
                t = zone.instant(
                    localSeconds: CivilTime.localSeconds(
                        year: now.year, month: now.month, day: now.day + 1, hour: now.hour, minute: now.minute,
                        second: now.second))
                // Where a whole day is skipped (Pacific/Apia, 2011-12-30), Go's normalisation
                // lands on the day before and robfig loops forever: step a real day instead.
                if t <= before { t = before + 86_400 }
                now = zone.civil(at: t)
                // Where midnight does not exist, the day starts an hour off: move back to it.
                if now.hour != 0 {
                    t += now.hour > 12 ? Int64(24 - now.hour) * 3600 : -Int64(now.hour) * 3600
                    now = zone.civil(at: t)
                }
                if now.day == 1 { continue search }
            }

            while hour & (1 << UInt64(now.hour)) == 0 {
                budget -= 1
                guard budget > 0 else { return nil }
                if !added {
                    added = true
                    t = date(now.year, now.month, now.day, now.hour)
                }
                t += 3600
                now = zone.civil(at: t)
                if now.hour == 0 { continue search }
            }

            while minute & (1 << UInt64(now.minute)) == 0 {
                budget -= 1
                guard budget > 0 else { return nil }
                if !added {
                    added = true
                    t -= CivilTime.floorMod(t, 60)  // Go's Truncate(time.Minute): on UTC time
                }
                t += 60
                now = zone.civil(at: t)
                if now.minute == 0 { continue search }
            }

            while second & (1 << UInt64(now.second)) == 0 {
                budget -= 1
                guard budget > 0 else { return nil }
                added = true
                t += 1
                now = zone.civil(at: t)
                if now.second == 0 { continue search }
            }
            return t
        }
    }
}
