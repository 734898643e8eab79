import FoundationEssentials
import Testing

@testable import Scripts

// Expected instants in the zone tests below were cross-checked against robfig/cron v3.0.1
// itself (Go, the same parser options plus Descriptor, the same TZif files).

private let utc = ZoneInfo.utc

/// A UTC date from its parts.
private func date(_ year: Int, _ month: Int, _ day: Int, _ hour: Int = 0, _ minute: Int = 0, _ second: Int = 0) -> Date {
    let seconds = CivilTime.localSeconds(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    return Date(timeIntervalSince1970: Double(seconds))
}

private func seconds(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970) }

/// The next `count` activations after `start`.
private func activations(_ spec: String, after start: Date, count: Int, zone: ZoneInfo = utc) throws -> [Date] {
    let schedule = try CronSchedule(parsing: spec, localZone: zone)
    var out: [Date] = []
    var current = start
    for _ in 0..<count {
        guard let next = schedule.next(after: current) else { break }
        out.append(next)
        current = next
    }
    return out
}

private func activations(_ spec: String, after start: Int64, count: Int, zone: ZoneInfo = utc) throws -> [Int64] {
    try activations(spec, after: Date(timeIntervalSince1970: Double(start)), count: count, zone: zone).map(seconds)
}

private func parseError(_ spec: String) -> CronError? {
    do {
        _ = try CronSchedule(parsing: spec, localZone: utc)
        return nil
    } catch {
        return error
    }
}

/// A small deterministic generator (SplitMix64) for the fuzz-like tests.
private struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

// MARK: Fields, seconds first

@Test func everySecond() throws {
    let start = date(2024, 1, 1).addingTimeInterval(0.5)
    #expect(try activations("* * * * * *", after: start, count: 3) == [date(2024, 1, 1, 0, 0, 1), date(2024, 1, 1, 0, 0, 2), date(2024, 1, 1, 0, 0, 3)])
    // Strictly after: a whole second is not its own next.
    #expect(try activations("* * * * * *", after: date(2024, 1, 1), count: 1) == [date(2024, 1, 1, 0, 0, 1)])
}

@Test func fiveFieldsAreSecondsFirst() throws {
    #expect(try activations("*/2 * * * *", after: date(2024, 1, 1), count: 3) == [date(2024, 1, 1, 0, 0, 2), date(2024, 1, 1, 0, 0, 4), date(2024, 1, 1, 0, 0, 6)])
    #expect(try activations("*/2 * * * *", after: date(2024, 1, 1, 0, 0, 58), count: 1) == [date(2024, 1, 1, 0, 1, 0)])
    #expect(try activations("*/5 * * * *", after: date(2024, 1, 1), count: 2) == [date(2024, 1, 1, 0, 0, 5), date(2024, 1, 1, 0, 0, 10)])
}

@Test func sixFieldExamples() throws {
    #expect(try activations("0 0 22 * * *", after: date(2024, 1, 1, 23), count: 2) == [date(2024, 1, 2, 22), date(2024, 1, 3, 22)])
    #expect(try activations("0 */5 * * * *", after: date(2024, 1, 1, 10, 3, 7), count: 3) == [date(2024, 1, 1, 10, 5), date(2024, 1, 1, 10, 10), date(2024, 1, 1, 10, 15)])
    #expect(try activations("30 15 9 1 * *", after: date(2024, 1, 1, 10), count: 2) == [date(2024, 2, 1, 9, 15, 30), date(2024, 3, 1, 9, 15, 30)])
    // Leap day only: four years apart, found within the five-year limit.
    #expect(try activations("0 0 0 29 2 *", after: date(2024, 3, 1), count: 1) == [date(2028, 2, 29)])
    // Never (February 30): nil, not a hang.
    #expect(try activations("0 0 0 30 2 *", after: date(2024, 1, 1), count: 1).isEmpty)
}

@Test func names() throws {
    // 2024-01-01 is a Monday.
    #expect(try activations("0 0 9 * JAN-MAR MON-FRI", after: date(2024, 1, 5, 10), count: 2) == [date(2024, 1, 8, 9), date(2024, 1, 9, 9)])
    #expect(try activations("0 0 12 1 feb *", after: date(2024, 1, 1), count: 1) == [date(2024, 2, 1, 12)])
    #expect(try activations("0 0 12 1 Feb,Dec *", after: date(2024, 2, 2), count: 1) == [date(2024, 12, 1, 12)])
    #expect(try activations("0 0 0 * * sun", after: date(2024, 1, 1), count: 1) == [date(2024, 1, 7)])
    #expect(try activations("0 0 0 * * tue-Thu", after: date(2024, 1, 1), count: 1) == [date(2024, 1, 2)])
    // No wrap-around: Saturday (6) to Sunday (0) is an empty range.
    #expect(parseError("0 0 0 * * Sat-sun") != nil)
}

@Test func rangesListsAndSteps() throws {
    let start = date(2024, 1, 1)
    #expect(try activations("10-20/5 * * * * *", after: start, count: 4).map { seconds($0) - seconds(start) } == [10, 15, 20, 70])
    // `a/n` is `a-max/n`.
    #expect(try activations("5/20 * * * * *", after: start, count: 4).map { seconds($0) - seconds(start) } == [5, 25, 45, 65])
    #expect(try activations("1,3,5-7 * * * * *", after: start, count: 5).map { seconds($0) - seconds(start) } == [1, 3, 5, 6, 7])
    // `?` is `*`; a step larger than the range is just the start.
    #expect(try activations("0 0 ? * * *", after: start, count: 1) == [date(2024, 1, 1, 1)])
    #expect(try activations("0/100 0 0 * * *", after: start, count: 1) == [date(2024, 1, 2)])
    // Robfig reads `+5` (Go's Atoi) and `07`.
    #expect(try activations("+5 07 * * * *", after: start, count: 1) == [date(2024, 1, 1, 0, 7, 5)])
}

@Test func dayOfMonthAndDayOfWeekStarRule() throws {
    let start = date(2024, 1, 1)  // a Monday
    // Neither is a star: either matches (the 13th, or any Friday).
    #expect(try activations("0 0 0 13 * FRI", after: start, count: 4) == [date(2024, 1, 5), date(2024, 1, 12), date(2024, 1, 13), date(2024, 1, 19)])
    // A star (or `?`) on one side: both must match.
    #expect(try activations("0 0 0 13 * *", after: start, count: 2) == [date(2024, 1, 13), date(2024, 2, 13)])
    #expect(try activations("0 0 0 ? * FRI", after: start, count: 2) == [date(2024, 1, 5), date(2024, 1, 12)])
    // `*/1` keeps the star bit (Mondays only); `1-31` does not (every day).
    #expect(try activations("0 0 0 */1 * MON", after: start, count: 2) == [date(2024, 1, 8), date(2024, 1, 15)])
    #expect(try activations("0 0 0 1-31 * MON", after: start, count: 2) == [date(2024, 1, 2), date(2024, 1, 3)])
    // `*/2` clears it: odd days or Mondays.
    #expect(try activations("0 0 0 */2 * MON", after: start, count: 3) == [date(2024, 1, 3), date(2024, 1, 5), date(2024, 1, 7)])
}

// MARK: Descriptors

@Test func descriptors() throws {
    let start = date(2024, 1, 1, 12)  // Monday noon
    #expect(try activations("@yearly", after: start, count: 1) == [date(2025, 1, 1)])
    #expect(try activations("@annually", after: start, count: 1) == [date(2025, 1, 1)])
    #expect(try activations("@monthly", after: start, count: 2) == [date(2024, 2, 1), date(2024, 3, 1)])
    #expect(try activations("@weekly", after: start, count: 2) == [date(2024, 1, 7), date(2024, 1, 14)])
    #expect(try activations("@daily", after: start, count: 1) == [date(2024, 1, 2)])
    #expect(try activations("@midnight", after: start, count: 1) == [date(2024, 1, 2)])
    #expect(try activations("@hourly", after: start, count: 2) == [date(2024, 1, 1, 13), date(2024, 1, 1, 14)])
    #expect(try activations("TZ=America/New_York @daily", after: start, count: 1) == [date(2024, 1, 2, 5)])
    #expect(try CronSchedule(parsing: "@daily", localZone: utc).warning == nil)
}

@Test func everyDescriptor() throws {
    #expect(try activations("@every 1m30s", after: 100, count: 2) == [190, 280])
    #expect(try activations("@every 1m", after: 100, count: 1) == [160])
    #expect(try activations("@every 1h30m", after: 0, count: 1) == [5400])
    // Below a second rounds up to one; fractions of a second are cut; the start is cut too.
    #expect(try activations("@every 500ms", after: 10, count: 2) == [11, 12])
    #expect(try activations("@every 1.5s", after: 10, count: 1) == [11])
    #expect(try activations("@every 0", after: 10, count: 1) == [11])
    #expect(try activations("@every -5s", after: 10, count: 1) == [11])
    #expect(try activations("@every 2h45m10.5s", after: 0, count: 1) == [9910])
    #expect(try activations("@every 90\u{B5}s", after: 0, count: 1) == [1])
    let fractional = try CronSchedule(parsing: "@every 90s", localZone: utc).next(after: Date(timeIntervalSince1970: 10.7))
    #expect(fractional == Date(timeIntervalSince1970: 100))
    #expect(try activations("  @every   10s  ", after: 0, count: 1) == [10])
    // Two parts of 2^63 ns each: refused, not an overflow that trapped on every manifest.
    #expect(parseError("@every 9223372036854775808ns9223372036854775808ns") != nil)
}

// MARK: Errors

@Test func invalidSpecs() {
    let bad = [
        "", "   ", "* * * *", "* * * * * * *", "60 * * * * *", "* 60 * * * *", "* * 24 * * *", "* * * 0 * *",
        "* * * 32 * *", "* * * * 0 *", "* * * * 13 *", "* * * * * 7", "a b c d e", "*/0 * * * * *",
        "5-1 * * * * *", "1-2-3 * * * * *", "1/2/3 * * * * *", ", * * * * *", "-1 * * * * *", "*/-1 * * * * *",
        "1- * * * * *", "99999999999999999999 * * * * *", "* * * * * MOO", "* * * * JANUARY *", "@every",
        "@every 5x", "@every 5", "@every x", "@every 1h 30m", "@everyday", "@fortnightly", "@", "@DAILY",
        "TZ=Nowhere/Zone * * * * * *", "TZ=../../etc/passwd * * * * * *", "TZ=/etc/localtime * * * * * *",
        "TZ=America * * * * * *", "TZ=UTC", "CRON_TZ=UTC   ", "TZ=UTC TZ=UTC * * * * *", "\u{0}",
        String(repeating: "*", count: 2000), String(repeating: "1,", count: 600) + "1 * * * * *",
    ]
    for spec in bad {
        #expect(parseError(spec) != nil, "accepted \(spec.debugDescription)")
    }
}

@Test func errorTextsNameTheSpecAndField() throws {
    let range = try #require(parseError("0 61 * * * *"))
    #expect(range.description == "cron \"0 61 * * * *\": minute field \"61\": 61 is above the maximum 59")
    let dow = try #require(parseError("0 0 0 * * 7"))
    #expect(dow.description.contains("day-of-week field \"7\""))
    let name = try #require(parseError("0 0 0 * FOO *"))
    #expect(name.description.contains("month field \"FOO\": \"FOO\" is not a number or a month name"))
    let count = try #require(parseError("* * *"))
    #expect(count.description.contains("expected 5 or 6 fields") && count.description.contains("found 3"))
    let zone = try #require(parseError("TZ=Nowhere/Zone * * * * * *"))
    #expect(zone.description.contains("Nowhere/Zone"))
    let duration = try #require(parseError("@every 5x"))
    #expect(duration.description.contains("unknown unit \"x\""))
    let long = try #require(parseError(String(repeating: "*", count: 2000)))
    #expect(long.description.contains("too long") && long.description.count < 200)
    // Control characters are escaped in the message.
    let control = try #require(parseError("\u{1B}[31m * * * * *"))
    #expect(!control.description.contains("\u{1B}") && control.description.contains("\\u{1b}"))
    #expect(parseError("") == CronError("empty cron spec \"\""))
}

// MARK: Warning

@Test func fiveFieldWarning() throws {
    let warned = try CronSchedule(parsing: "*/5 * * * *", localZone: utc)
    let warning = try #require(warned.warning)
    #expect(warning.contains("\"*/5 * * * *\"") && warning.contains("seconds first"))
    #expect(warning.contains("\"0 */5 * * * *\""))
    let zoned = try #require(try CronSchedule(parsing: "TZ=UTC 0 0 * * *", localZone: utc).warning)
    #expect(zoned.contains("\"TZ=UTC 0 0 0 * * *\""))
    // Not a valid Unix crontab (hour 30; a month name as day of week): no warning.
    #expect(try CronSchedule(parsing: "0 30 14 * *", localZone: utc).warning == nil)
    #expect(try CronSchedule(parsing: "0 0 * * JAN", localZone: utc).warning == nil)
    // Six fields or a descriptor: no warning.
    #expect(try CronSchedule(parsing: "0 */5 * * * *", localZone: utc).warning == nil)
    #expect(try CronSchedule(parsing: "@hourly", localZone: utc).warning == nil)
}

// MARK: Time zones

@Test func newYorkSpringGapIsSkippedAsRobfigDoes() throws {
    // 2021-03-14 02:30 does not exist in New York: robfig skips that day.
    let spec = "CRON_TZ=America/New_York 0 30 2 * * *"
    #expect(try activations(spec, after: 1_615_636_800, count: 3) == [1_615_789_800, 1_615_876_200, 1_615_962_600])
    // Before the gap it runs at 02:30 EST (07:30 UTC).
    #expect(try activations(spec, after: date(2021, 3, 12), count: 1) == [date(2021, 3, 12, 7, 30)])
}

@Test func newYorkFallBackRunsTwice() throws {
    // 2021-11-07 01:30 happens twice (EDT, then EST): robfig matches both.
    #expect(try activations("CRON_TZ=America/New_York 0 30 1 * * *", after: 1_636_200_000, count: 3) == [1_636_263_000, 1_636_266_600, 1_636_353_000])
}

@Test func berlin() throws {
    let noon = "TZ=Europe/Berlin 0 0 12 * * *"
    #expect(try activations(noon, after: 1_711_760_400, count: 2) == [1_711_796_400, 1_711_879_200])  // 11:00, then 10:00 UTC
    #expect(try activations("TZ=Europe/Berlin 0 30 2 * * *", after: 1_711_760_400, count: 3) == [1_711_762_200, 1_711_931_400, 1_712_017_800])
    #expect(try activations("TZ=Europe/Berlin 0 30 2 * * *", after: 1_729_900_800, count: 3) == [1_729_902_600, 1_729_989_000, 1_729_992_600])
    // The local zone applies without a prefix.
    let berlin = try ZoneInfo.named("Europe/Berlin")
    #expect(try activations("0 0 12 * * *", after: 1_711_760_400, count: 1, zone: berlin) == [1_711_796_400])
}

@Test func footerRuleAfterTheTransitionTable() throws {
    // 2040 is past the files' tables (2037): the footer's POSIX rule gives the offset.
    #expect(try activations("TZ=America/New_York 0 0 12 1 7 *", after: 2_208_988_800, count: 2) == [2_224_771_200, 2_256_307_200])
    #expect(try activations("TZ=Australia/Sydney 0 0 12 1 1,7 *", after: 2_208_988_800, count: 2) == [2_208_992_400, 2_224_720_800])
    let newYork = try ZoneInfo.named("America/New_York")
    #expect(newYork.offset(at: seconds(date(2050, 7, 1))) == -4 * 3600)
    #expect(newYork.offset(at: seconds(date(2050, 1, 1))) == -5 * 3600)
}

@Test func footerRuleAgreesWithTheTables() throws {
    // Where a file has both, its rule and its table must give the same offsets.
    let zones = [
        "America/New_York", "Europe/Berlin", "Australia/Sydney", "Australia/Lord_Howe", "America/St_Johns",
        "Pacific/Chatham", "Europe/Dublin", "Asia/Jerusalem", "America/Santiago", "Pacific/Auckland",
    ]
    for name in zones {
        let zone = try ZoneInfo.named(name)
        let rule = try #require(zone.rule, "\(name) has no footer")
        let last = try #require(zone.transitions.last)
        var instant = seconds(date(2026, 1, 1))
        while instant < last {
            #expect(rule.period(at: instant, lastTransition: .min).offset == zone.offset(at: instant), "\(name) at \(instant)")
            instant += 3 * 3600 + 17
        }
    }
}

@Test func historicalOddities() throws {
    // Pacific/Apia skipped 2011-12-30 entirely; robfig itself loops forever here.
    #expect(try activations("TZ=Pacific/Apia 0 0 0 * * *", after: date(2011, 12, 28), count: 3).count == 3)
    // St. John's fell back at 00:01: robfig answers 23:15 (which does not match) over and
    // over; the first matching second is 00:15 NST.
    #expect(try activations("TZ=America/St_Johns 0 15 0-3 * * *", after: 846_384_300, count: 2) == [846_387_900, 846_391_500])
}

@Test func zoneNames() throws {
    #expect(try ZoneInfo.named("UTC") == .utc)
    #expect(try ZoneInfo.named("") == .utc)
    for name in ["../etc/passwd", "/etc/localtime", "America/../../etc/passwd", "Nowhere", "America", "a\u{0}b", "\\x"] {
        #expect(throws: CronError.self) { try ZoneInfo.named(name) }
    }
    // Whatever the machine's zone, reading it never fails.
    _ = ZoneInfo.local
    #expect(try CronSchedule(parsing: "0 0 0 * * *").next(after: date(2024, 1, 1)) != nil)
}

// MARK: TZif

/// A TZif file built by hand.
private func tzif(version: UInt8, transitions: [Int64], types: [Int32], footer: String?) -> [UInt8] {
    func be32(_ value: Int64) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) } }
    func be64(_ value: Int64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) } }
    func block(wide: Bool) -> [UInt8] {
        var out = Array("TZif".utf8) + [version] + [UInt8](repeating: 0, count: 15)
        for count in [0, 0, 0, transitions.count, types.count, 4] { out += be32(Int64(count)) }
        for time in transitions { out += wide ? be64(time) : be32(time) }
        out += transitions.indices.map { UInt8(($0 + 1) % types.count) }  // transition i to type i+1
        for offset in types { out += be32(Int64(offset)) + [0, 0] }
        out += Array("ABC\u{0}".utf8)
        return out
    }
    var out = block(wide: false)
    if version != 0 {
        out += block(wide: true)
        out += Array("\n\(footer ?? "")\n".utf8)
    }
    return out
}

@Test func handBuiltTZif() throws {
    let v1 = try ZoneInfo(tzif: tzif(version: 0, transitions: [1000, 2000], types: [3600, -7200], footer: nil))
    #expect(v1.offset(at: 0) == 3600)
    #expect(v1.offset(at: 1500) == -7200)
    #expect(v1.offset(at: 2500) == 3600)
    let v2 = try ZoneInfo(tzif: tzif(version: UInt8(ascii: "2"), transitions: [1000], types: [0, 19800], footer: "<+0530>-5:30"))
    #expect(v2.offset(at: 500) == 0)
    #expect(v2.offset(at: 5000) == 19800)
    // v3's rule times beyond 24 hours (Israel-style).
    let v3 = try ZoneInfo(tzif: tzif(version: UInt8(ascii: "3"), transitions: [0], types: [7200], footer: "IST-2IDT,M3.4.4/26,M10.5.0"))
    #expect(v3.offset(at: seconds(date(2040, 7, 1))) == 3 * 3600)
    #expect(v3.offset(at: seconds(date(2040, 1, 1))) == 2 * 3600)
    // Julian day rules.
    let julian = try ZoneInfo(tzif: tzif(version: UInt8(ascii: "2"), transitions: [], types: [0], footer: "AAA0BBB,J60/0,J300"))
    #expect(julian.offset(at: seconds(date(2041, 3, 1, 12))) == 3600)
    #expect(julian.offset(at: seconds(date(2041, 2, 28, 12))) == 0)
    // An unusable footer leaves the last transition in force.
    let broken = try ZoneInfo(tzif: tzif(version: UInt8(ascii: "2"), transitions: [10], types: [0, 600], footer: "X"))
    #expect(broken.offset(at: 1_000_000) == 600)
}

@Test func malformedTZif() throws {
    let good = tzif(version: UInt8(ascii: "2"), transitions: [1000, 2000], types: [3600, -7200], footer: "UTC0")
    _ = try ZoneInfo(tzif: good)
    #expect(throws: CronError.self) { try ZoneInfo(tzif: []) }
    #expect(throws: CronError.self) { try ZoneInfo(tzif: Array("TZif".utf8)) }
    for cut in stride(from: 0, to: good.count - 7, by: 3) {  // cut inside the data (the footer is optional)
        #expect(throws: CronError.self) { try ZoneInfo(tzif: Array(good[..<cut])) }
    }
    #expect(throws: CronError.self) { try ZoneInfo(tzif: tzif(version: 0, transitions: [2000, 1000], types: [0], footer: nil)) }
    #expect(throws: CronError.self) { try ZoneInfo(tzif: tzif(version: 0, transitions: [], types: [], footer: nil)) }
    #expect(throws: CronError.self) { try ZoneInfo(tzif: tzif(version: 0, transitions: [], types: [Int32.min], footer: nil)) }
    var huge = good
    huge += [UInt8](repeating: 0, count: 1 << 20)
    #expect(throws: CronError.self) { try ZoneInfo(tzif: huge) }
    // Counts claiming more than the file holds.
    var lying = good
    lying[32...35] = [0xFF, 0xFF, 0xFF, 0xFF]
    #expect(throws: CronError.self) { try ZoneInfo(tzif: lying) }
}

// MARK: Robustness

@Test func extremeDates() throws {
    let schedule = try CronSchedule(parsing: "0 0 0 * * *", localZone: try ZoneInfo.named("Europe/Berlin"))
    #expect(schedule.next(after: Date(timeIntervalSince1970: .infinity)) == nil)
    #expect(schedule.next(after: Date(timeIntervalSince1970: .nan)) == nil)
    #expect(schedule.next(after: Date(timeIntervalSince1970: 1e15)) == nil)
    #expect(schedule.next(after: Date(timeIntervalSince1970: -1e11)) != nil)
    #expect(schedule.next(after: .distantFuture) != nil)
    let every = try CronSchedule(parsing: "@every 2562047h", localZone: utc)
    #expect(every.next(after: Date(timeIntervalSince1970: 0)) != nil)
}

@Test func equality() throws {
    #expect(try CronSchedule(parsing: "0 0 * * * *", localZone: utc) == CronSchedule(parsing: "0 0 * * * *", localZone: utc))
    #expect(try CronSchedule(parsing: "0 0 * * * *", localZone: utc) != CronSchedule(parsing: "0 1 * * * *", localZone: utc))
}

@Test func randomSpecsNeverCrash() throws {
    var random = SplitMix64(state: 42)
    let tokens = ["*", "?", "0", "1", "5", "7", "12", "1-5", "*/3", "2/7", "1-6/2", "JAN", "mon", "Fri-Sat", "*/1", "70", "*", "*", "0", "3"]
    let alphabet = Array("0123456789012345678901234567890123456789****///---,,??JANMONsunx@\u{00A0}é".unicodeScalars)
    let zones = [utc, try ZoneInfo.named("America/New_York"), try ZoneInfo.named("Australia/Lord_Howe")]
    var parsed = 0
    for round in 0..<4000 {
        var spec = ""
        if round % 2 == 0 {
            // Random bytes, decoded leniently.
            let bytes = (0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            spec = String(decoding: bytes, as: UTF8.self)
        } else {
            // Five or six fields of cron-ish characters, sometimes with a prefix or noise.
            let fieldCount = [5, 6, 6, 5, 4, 7].randomElement(using: &random)!
            spec = (0..<fieldCount).map { _ in
                var items: [String] = []
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    if Int.random(in: 0..<25, using: &random) == 0 {
                        items.append(String(alphabet.randomElement(using: &random)!))
                    } else {
                        items.append(tokens.randomElement(using: &random)!)
                    }
                }
                return items.joined(separator: ",")
            }.joined(separator: " ")
            if round % 7 == 1 { spec = "CRON_TZ=Europe/Berlin " + spec }
        }
        guard let schedule = try? CronSchedule(parsing: spec, localZone: zones[round % zones.count]) else { continue }
        parsed += 1
        var current = Date(timeIntervalSince1970: Double(Int64.random(in: 0...4_000_000_000, using: &random)))
        for _ in 0..<3 {
            guard let next = schedule.next(after: current) else { break }
            #expect(next > current, "\(spec.debugDescription) went backwards")
            current = next
        }
    }
    #expect(parsed > 50)
}

@Test func randomTZifNeverCrashes() throws {
    var random = SplitMix64(state: 7)
    let seeds = [
        try ZoneInfo.readFile(path: "/usr/share/zoneinfo/America/New_York", name: "seed"),
        tzif(version: UInt8(ascii: "3"), transitions: [0, 1000], types: [3600, 0], footer: "AAA-1BBB,M3.5.0,M10.5.0/3"),
    ]
    var accepted = 0
    for round in 0..<1500 {
        var bytes = seeds[round % seeds.count]
        for _ in 0..<Int.random(in: 1...6, using: &random) {
            let index = Int.random(in: 0..<bytes.count, using: &random)
            bytes[index] = UInt8.random(in: 0...255, using: &random)
        }
        guard let zone = try? ZoneInfo(tzif: bytes) else { continue }
        accepted += 1
        for instant: Int64 in [.min, -1, 0, 1_700_000_000, 4_000_000_000, .max] {
            _ = zone.offset(at: instant)
        }
        let schedule = try CronSchedule(parsing: "0 30 2 * * *", localZone: zone)
        var current = Date(timeIntervalSince1970: 1_700_000_000)
        for _ in 0..<2 {
            guard let next = schedule.next(after: current) else { break }
            #expect(next > current)
            current = next
        }
    }
    #expect(accepted > 100)
}
