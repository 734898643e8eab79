/// A wall-clock reading in the proleptic Gregorian calendar, without a zone: what a zone's
/// clock shows at some instant. Local seconds are seconds since 1970-01-01 00:00:00 of that
/// clock (UTC seconds plus the zone's offset).
struct CivilTime: Equatable, Sendable {
    var year: Int
    var month: Int  // 1...12
    var day: Int  // 1...31
    var hour: Int
    var minute: Int
    var second: Int
    var weekday: Int  // 0 = Sunday ... 6 = Saturday

    init(localSeconds: Int64) {
        let days = Self.floorDiv(localSeconds, 86_400)
        let secondOfDay = Int(localSeconds - days * 86_400)
        let date = Self.civil(fromDays: days)
        year = date.year
        month = date.month
        day = date.day
        hour = secondOfDay / 3600
        minute = secondOfDay / 60 % 60
        second = secondOfDay % 60
        weekday = Int(Self.floorMod(days + 4, 7))  // 1970-01-01 was a Thursday
    }

    /// Local seconds of a reading whose parts may overflow, normalised as Go's `time.Date`
    /// does: the month carries into the year, everything else adds up linearly.
    static func localSeconds(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Int64 {
        let monthIndex = Int64(month) - 1
        let carriedYear = Int64(year) + floorDiv(monthIndex, 12)
        let normalisedMonth = Int(floorMod(monthIndex, 12)) + 1
        let days = days(year: carriedYear, month: normalisedMonth, day: 1) + Int64(day) - 1
        return days * 86_400 + Int64(hour) * 3600 + Int64(minute) * 60 + Int64(second)
    }

    /// Days since 1970-01-01 of a date (month 1...12; the day may run past the month).
    static func days(year: Int64, month: Int, day: Int) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = floorDiv(y, 400)
        let yearOfEra = y - era * 400
        let shiftedMonth = Int64(month > 2 ? month - 3 : month + 9)
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = floorDiv(z, 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }

    static func isLeap(_ year: Int64) -> Bool {
        year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    }

    static func daysIn(month: Int, year: Int64) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }

    static func floorMod(_ a: Int64, _ b: Int64) -> Int64 {
        a - floorDiv(a, b) * b
    }
}
