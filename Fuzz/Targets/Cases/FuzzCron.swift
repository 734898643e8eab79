import FoundationEssentials
import Scripts

/// Zones a spec is read in when it has no `TZ=` prefix (read once; UTC where a file is missing).
private let fuzzZones: [ZoneInfo] = ["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/St_Johns"].map {
    (try? ZoneInfo.named($0)) ?? ((try? ZoneInfo.named("UTC"))!)
}

/// The largest offset a TZif file or its footer can give: a POSIX TZ string allows up to
/// 167:59:59 (v3), the table ±25:59:59.
private let fuzzMaxOffset = 168 * 3600

/// `coder_script` cron schedules (Scripts' CronSchedule) and the TZif files their zones are
/// read from. The first byte picks the case.
///
/// A spec: any text parses or is refused with a message naming it; a parsed schedule's
/// activations (a few, from a start taken from the input) are whole seconds and strictly
/// increasing, and a warning is only ever the seconds-first one.
///
/// A TZif file: any bytes are read or refused, never a trap; an accepted zone's offsets are
/// within the format's bounds at any instant, `* * * * * *` in it fires exactly one second
/// later, and a daily schedule in it (02:30, inside DST gaps the fuzzer may invent) still
/// moves strictly forward.
public func fuzzCron(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let mode = input.byte()
    let start = Int64(input.uint(5) % 8_000_000_000) - 2_000_000_000  // 1906 ... 2223
    if mode & 1 == 0 {
        let zone = fuzzZones[Int(mode >> 1) % fuzzZones.count]
        let spec = String(decoding: input.rest(), as: UTF8.self)
        let schedule: CronSchedule
        do {
            schedule = try CronSchedule(parsing: spec, localZone: zone)
        } catch {
            require(!error.description.isEmpty, "an empty error message")
            require(error.description.utf8.count < 4096, "an error message of \(error.description.utf8.count) bytes")
            return 0
        }
        require(schedule.spec == spec, "the schedule does not keep its spec")
        if let warning = schedule.warning {
            require(warning.contains("seconds first"), "an unexpected warning: \(warning)")
        }
        checkActivations(schedule, from: start, count: 4)
    } else {
        let zone: ZoneInfo
        do {
            zone = try ZoneInfo(tzif: input.rest())
        } catch {
            require(!error.description.isEmpty, "an empty error message")
            return 0
        }
        for instant: Int64 in [.min, -1 << 40, start - 86_400, start, start + 3_600, 4_102_444_800, 1 << 40, .max] {
            let offset = zone.offset(at: instant)
            require(abs(offset) <= fuzzMaxOffset, "offset \(offset) at \(instant)")
        }
        guard let everySecond = try? CronSchedule(parsing: "* * * * * *", localZone: zone),
            let daily = try? CronSchedule(parsing: "0 30 2 * * *", localZone: zone)
        else {
            require(false, "a fixed spec was refused")
            return 0
        }
        let next = everySecond.next(after: Date(timeIntervalSince1970: Double(start)))
        require(next == Date(timeIntervalSince1970: Double(start + 1)), "every second did not fire a second later")
        checkActivations(daily, from: start, count: 3)
    }
    return 0
}

/// `count` activations from `start`: whole seconds, each strictly after the one before.
private func checkActivations(_ schedule: CronSchedule, from start: Int64, count: Int) {
    var current = Date(timeIntervalSince1970: Double(start))
    for _ in 0..<count {
        guard let next = schedule.next(after: current) else { return }
        require(next > current, "\(schedule.spec.debugDescription): \(next) is not after \(current)")
        let seconds = next.timeIntervalSince1970
        require(seconds == seconds.rounded(.down), "\(schedule.spec.debugDescription): \(seconds) is not a whole second")
        current = next
    }
}
