import Glibc

/// A time zone read from the system's TZif files (`/usr/share/zoneinfo`), without
/// Foundation's ICU: the UTC offset at any instant, from the file's transition table and,
/// after its last transition, its footer's POSIX TZ rule.
public struct ZoneInfo: Sendable, Equatable {
    /// The name it was loaded by ("UTC", "Local", "Europe/Berlin", a path from `TZ`).
    let name: String
    /// Transition instants (UTC seconds), strictly ascending.
    let transitions: [Int64]
    /// The offset (seconds east of UTC) in force from each transition on.
    let offsets: [Int32]
    /// The offset before the first transition (local time type 0).
    let firstOffset: Int32
    /// The footer's rule, for instants after the last transition (or all, without any).
    let rule: PosixTZRule?

    static let zoneDirectory = "/usr/share/zoneinfo/"

    /// Instants are clamped to ±2^50 s (some 35 million years) before calendar arithmetic.
    static let instantLimit: Int64 = 1 << 50

    static let utc = ZoneInfo(name: "UTC", transitions: [], offsets: [], firstOffset: 0, rule: nil)

    init(name: String, transitions: [Int64], offsets: [Int32], firstOffset: Int32, rule: PosixTZRule?) {
        self.name = name
        self.transitions = transitions
        self.offsets = offsets
        self.firstOffset = firstOffset
        self.rule = rule
    }

    /// A zone from the bytes of a TZif file (untrusted: checked throughout, at most 1 MiB).
    public init(tzif bytes: [UInt8]) throws(CronError) {
        self = try TZifReader.zone(from: bytes, name: "TZif data")
    }

    /// Seconds east of UTC at `epochSeconds` (seconds since 1970-01-01T00:00:00Z).
    public func offset(at epochSeconds: Int64) -> Int {
        period(at: epochSeconds).offset
    }

    /// An offset and the span of UTC instants `[start, end)` around the asked one where it
    /// holds (as Go's `Location.lookup`: the span may be narrower than the truth, not wider,
    /// except at the far end of a footer rule's year, as in Go).
    struct Period: Equatable {
        var offset: Int
        var start: Int64
        var end: Int64
    }

    func period(at instant: Int64) -> Period {
        guard let firstTransition = transitions.first else {
            if let rule { return rule.period(at: instant, lastTransition: .min) }
            return Period(offset: Int(firstOffset), start: .min, end: .max)
        }
        if instant < firstTransition {
            return Period(offset: Int(firstOffset), start: .min, end: firstTransition)
        }
        // The last transition at or before `instant`.
        var low = 0
        var high = transitions.count
        while high - low > 1 {
            let middle = low + (high - low) / 2
            if transitions[middle] <= instant { low = middle } else { high = middle }
        }
        if low == transitions.count - 1, let rule {
            return rule.period(at: instant, lastTransition: transitions[low])
        }
        let end = low + 1 < transitions.count ? transitions[low + 1] : .max
        return Period(offset: Int(offsets[low]), start: transitions[low], end: end)
    }

    /// The first instant after `instant` where ``offset(at:)`` may change (`Int64.max` if
    /// never): the next transition, or the footer rule's next change.
    func nextChange(after instant: Int64) -> Int64 {
        if let last = transitions.last, instant < last {
            var low = 0
            var high = transitions.count - 1
            // The first transition after `instant`.
            while low < high {
                let middle = low + (high - low) / 2
                if transitions[middle] > instant { high = middle } else { low = middle + 1 }
            }
            return transitions[low]
        }
        return rule?.nextChange(after: instant) ?? .max
    }

    /// The wall clock at a UTC instant.
    func civil(at instant: Int64) -> CivilTime {
        CivilTime(localSeconds: instant + Int64(offset(at: instant)))
    }

    /// The UTC instant of a wall-clock reading, chosen as Go's `time.Date` chooses: in a gap
    /// or an overlap this is one of the two nearby candidates, never an error.
    func instant(localSeconds local: Int64) -> Int64 {
        let guess = period(at: local)
        guard guess.offset != 0 else { return local }
        var offset = guess.offset
        let utc = local - Int64(offset)
        if utc < guess.start || utc >= guess.end {
            offset = period(at: utc).offset
        }
        return local - Int64(offset)
    }

    // MARK: Loading

    /// A zone by its IANA name, as Go's `time.LoadLocation`: "" and "UTC" are UTC, "Local"
    /// is ``local``; anything else is read from `/usr/share/zoneinfo/<name>`. Names with
    /// `..`, absolute names and names with NUL are refused.
    public static func named(_ name: String) throws(CronError) -> ZoneInfo {
        if name.isEmpty || name == "UTC" { return .utc }
        if name == "Local" { return .local }
        let bytes = Array(name.utf8)
        guard bytes.count <= 255, !name.contains(".."), bytes.first != UInt8(ascii: "/"),
            bytes.first != UInt8(ascii: "\\"), !bytes.contains(0)
        else { throw CronError("invalid time zone name \(CronError.quoted(name))") }
        return try load(path: zoneDirectory + name, name: name)
    }

    /// The agent's own zone, as Go's `time.Local`: `TZ` when set (`:Name`, `Name` or an
    /// absolute path; empty means UTC), else `/etc/localtime`; UTC when that cannot be read.
    /// Read afresh on each use.
    public static var local: ZoneInfo {
        guard let pointer = getenv("TZ") else {
            return (try? load(path: "/etc/localtime", name: "Local")) ?? .utc
        }
        var tz = String(cString: pointer)
        if tz.hasPrefix(":") { tz.removeFirst() }
        if tz.hasPrefix("/") {
            return (try? load(path: tz, name: tz)) ?? .utc
        }
        if tz.isEmpty || tz == "UTC" || tz == "Local" { return .utc }
        return (try? named(tz)) ?? .utc
    }

    static func load(path: String, name: String) throws(CronError) -> ZoneInfo {
        let bytes = try readFile(path: path, name: name)
        return try TZifReader.zone(from: bytes, name: name)
    }

    /// A regular file's bytes, at most ``TZifReader/maxFileSize`` of them.
    static func readFile(path: String, name: String) throws(CronError) -> [UInt8] {
        let unknown = CronError("unknown time zone \(CronError.quoted(name))")
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard descriptor >= 0 else { throw unknown }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { throw unknown }
        let limit = TZifReader.maxFileSize
        guard status.st_size <= limit else {
            throw CronError("time zone \(CronError.quoted(name)): the TZif file is larger than \(limit) bytes")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(status.st_size))
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = chunk.withUnsafeMutableBytes { buffer in
                read(descriptor, buffer.baseAddress, buffer.count)
            }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw unknown }
            if count == 0 { break }
            bytes += chunk[0..<count]
            guard bytes.count <= limit else {
                throw CronError("time zone \(CronError.quoted(name)): the TZif file is larger than \(limit) bytes")
            }
        }
        return bytes
    }
}
