/// The POSIX TZ string in a TZif footer (RFC 8536 section 3.3), which gives the offset for
/// instants after the file's last transition: `std offset [dst [offset] [,start[/time],end[/time]]]`
/// with `Jn`, `n` and `Mm.w.d` day rules and v3's extended rule times. Read and applied as
/// Go's `time` package does (its `tzset`), so that instants past the transition table map as
/// they do for robfig/cron.
struct PosixTZRule: Sendable, Equatable {
    struct Change: Sendable, Equatable {
        enum Day: Sendable, Equatable {
            /// `Jn`: day 1...365, February 29 never counted.
            case julian(Int)
            /// `n`: day 0...365, February 29 counted.
            case zeroBased(Int)
            /// `Mm.w.d`: weekday `d` (0 = Sunday) of week `w` (5 = last) of month `m`.
            case monthWeek(month: Int, week: Int, weekday: Int)
        }

        var day: Day
        /// Local seconds after midnight (default 02:00; v3 allows -167...167 hours).
        var time: Int
    }

    struct Daylight: Sendable, Equatable {
        var offset: Int
        var start: Change
        var end: Change
    }

    /// Seconds east of UTC.
    var standardOffset: Int
    var daylight: Daylight?

    /// nil when the text is not a TZ string Go would apply.
    init?(_ text: ArraySlice<UInt8>) {
        var reader = Reader(bytes: text)
        guard reader.name(), let std = reader.offset() else { return nil }
        standardOffset = -std
        if reader.atEnd || reader.peek == UInt8(ascii: ",") {
            daylight = nil
            return
        }
        guard reader.name() else { return nil }
        var dstOffset = standardOffset + 3600
        if !reader.atEnd, reader.peek != UInt8(ascii: ",") {
            guard let offset = reader.offset() else { return nil }
            dstOffset = -offset
        }
        var start = Change(day: .monthWeek(month: 3, week: 2, weekday: 0), time: 7200)
        var end = Change(day: .monthWeek(month: 11, week: 1, weekday: 0), time: 7200)
        if !reader.atEnd {
            // tzcode (and Go) also take ';' before the rules.
            guard reader.skip(UInt8(ascii: ",")) || reader.skip(UInt8(ascii: ";")),
                let first = reader.change(), reader.skip(UInt8(ascii: ",")),
                let second = reader.change(), reader.atEnd
            else { return nil }
            start = first
            end = second
        }
        daylight = Daylight(offset: dstOffset, start: start, end: end)
    }

    /// The offset in force at `instant` (UTC seconds) and the span around it where it holds,
    /// as Go computes them: exact near a change, otherwise the bounds of the UTC year.
    func period(at instant: Int64, lastTransition: Int64) -> ZoneInfo.Period {
        guard let daylight else {
            return ZoneInfo.Period(offset: standardOffset, start: lastTransition, end: .max)
        }
        let sec = min(max(instant, -ZoneInfo.instantLimit), ZoneInfo.instantLimit)
        let days = CivilTime.floorDiv(sec, 86_400)
        let year = Int64(CivilTime.civil(fromDays: days).year)
        let yearStartDays = CivilTime.days(year: year, month: 1, day: 1)
        let secondOfYear = (days - yearStartDays) * 86_400 + CivilTime.floorMod(sec, 86_400)
        let yearStart = yearStartDays * 86_400

        var startSecond = Self.secondOfYear(daylight.start, year: year, offset: standardOffset)
        var endSecond = Self.secondOfYear(daylight.end, year: year, offset: daylight.offset)
        var outsideOffset = standardOffset
        var insideOffset = daylight.offset
        if endSecond < startSecond {
            // Southern hemisphere: the year starts and ends in daylight time.
            swap(&startSecond, &endSecond)
            swap(&outsideOffset, &insideOffset)
        }
        if secondOfYear < startSecond {
            return ZoneInfo.Period(offset: outsideOffset, start: yearStart, end: yearStart + startSecond)
        }
        if secondOfYear >= endSecond {
            return ZoneInfo.Period(offset: outsideOffset, start: yearStart + endSecond, end: yearStart + 365 * 86_400)
        }
        return ZoneInfo.Period(offset: insideOffset, start: yearStart + startSecond, end: yearStart + endSecond)
    }

    /// The first instant after `instant` where ``period(at:lastTransition:)`` may answer a
    /// different offset: one of this UTC year's two changes, or the next year's start (the
    /// rule is applied year by year).
    func nextChange(after instant: Int64) -> Int64 {
        guard let daylight else { return .max }
        guard instant < ZoneInfo.instantLimit else { return .max }
        let sec = max(instant, -ZoneInfo.instantLimit)
        let year = Int64(CivilTime.civil(fromDays: CivilTime.floorDiv(sec, 86_400)).year)
        let yearStart = CivilTime.days(year: year, month: 1, day: 1) * 86_400
        let candidates = [
            yearStart + Self.secondOfYear(daylight.start, year: year, offset: standardOffset),
            yearStart + Self.secondOfYear(daylight.end, year: year, offset: daylight.offset),
            CivilTime.days(year: year + 1, month: 1, day: 1) * 86_400,
        ]
        return candidates.filter { $0 > instant }.min() ?? .max
    }

    /// UTC seconds after the start of `year` at which `change` happens, the clock then
    /// reading `offset` seconds east of UTC.
    static func secondOfYear(_ change: Change, year: Int64, offset: Int) -> Int64 {
        var day: Int64
        switch change.day {
        case .julian(let n):
            day = Int64(n - 1)
            if CivilTime.isLeap(year), n >= 60 { day += 1 }
        case .zeroBased(let n):
            day = Int64(n)
        case .monthWeek(let month, let week, let weekday):
            let firstOfMonth = CivilTime.days(year: year, month: month, day: 1)
            let firstWeekday = Int(CivilTime.floorMod(firstOfMonth + 4, 7))
            var dayOfMonth = weekday - firstWeekday
            if dayOfMonth < 0 { dayOfMonth += 7 }
            let length = CivilTime.daysIn(month: month, year: year)
            for _ in 1..<week where dayOfMonth + 7 < length {
                dayOfMonth += 7
            }
            day = firstOfMonth - CivilTime.days(year: year, month: 1, day: 1) + Int64(dayOfMonth)
        }
        return day * 86_400 + Int64(change.time) - Int64(offset)
    }

    /// A cursor over the TZ string's bytes.
    struct Reader {
        var bytes: ArraySlice<UInt8>

        var atEnd: Bool { bytes.isEmpty }
        var peek: UInt8? { bytes.first }

        mutating func skip(_ byte: UInt8) -> Bool {
            guard bytes.first == byte else { return false }
            bytes = bytes.dropFirst()
            return true
        }

        /// A zone abbreviation: `<...>`, or at least three bytes up to a digit, ',', '-' or '+'.
        mutating func name() -> Bool {
            guard let first = bytes.first else { return false }
            if first == UInt8(ascii: "<") {
                guard let close = bytes.firstIndex(of: UInt8(ascii: ">")) else { return false }
                bytes = bytes[(close + 1)...]
                return true
            }
            let end =
                bytes.firstIndex { byte in
                    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ",")
                        || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+")
                } ?? bytes.endIndex
            guard end - bytes.startIndex >= 3 else { return false }
            bytes = bytes[end...]
            return true
        }

        /// `[+-]hh[:mm[:ss]]` in seconds, as written (west of UTC positive).
        mutating func offset() -> Int? {
            var negative = false
            if skip(UInt8(ascii: "+")) {
            } else if skip(UInt8(ascii: "-")) {
                negative = true
            }
            guard let hours = number(in: 0...(24 * 7)) else { return nil }
            var total = hours * 3600
            if skip(UInt8(ascii: ":")) {
                guard let minutes = number(in: 0...59) else { return nil }
                total += minutes * 60
                if skip(UInt8(ascii: ":")) {
                    guard let seconds = number(in: 0...59) else { return nil }
                    total += seconds
                }
            }
            return negative ? -total : total
        }

        /// `Jn`, `n` or `Mm.w.d`, then an optional `/time`.
        mutating func change() -> Change? {
            let day: Change.Day
            if skip(UInt8(ascii: "J")) {
                guard let n = number(in: 1...365) else { return nil }
                day = .julian(n)
            } else if skip(UInt8(ascii: "M")) {
                guard let month = number(in: 1...12), skip(UInt8(ascii: ".")),
                    let week = number(in: 1...5), skip(UInt8(ascii: ".")),
                    let weekday = number(in: 0...6)
                else { return nil }
                day = .monthWeek(month: month, week: week, weekday: weekday)
            } else {
                guard let n = number(in: 0...365) else { return nil }
                day = .zeroBased(n)
            }
            guard skip(UInt8(ascii: "/")) else { return Change(day: day, time: 7200) }
            guard let time = offset() else { return nil }
            return Change(day: day, time: time)
        }

        /// Decimal digits (at least one) whose value lies in `range`.
        mutating func number(in range: ClosedRange<Int>) -> Int? {
            var value = 0
            var digits = 0
            while let byte = bytes.first, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
                guard value <= range.upperBound else { return nil }
                digits += 1
                bytes = bytes.dropFirst()
            }
            guard digits > 0, value >= range.lowerBound else { return nil }
            return value
        }
    }
}
