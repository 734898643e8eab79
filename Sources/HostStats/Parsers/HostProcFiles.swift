/// The host-wide `/proc` files as the reference's libraries read them: `/proc/meminfo`
/// (elastic/go-sysinfo) and the CPU times of `/proc/stat` (prometheus/procfs).
public enum HostProcFiles {
    /// `MemTotal` and the available memory, in bytes.
    public struct Memory: Equatable, Sendable {
        public var total: UInt64
        public var available: UInt64
    }

    /// go-sysinfo's `parseMemInfo`: a value that does not parse is skipped, a line without
    /// `:` fails the file; no `MemAvailable` (before Linux 3.14): free + buffers + cached.
    public static func memory(_ bytes: [UInt8]) -> Result<Memory, StatError> {
        var total: UInt64 = 0
        var free: UInt64 = 0
        var available: UInt64?
        var buffers: UInt64 = 0
        var cached: UInt64 = 0
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
                return .failure(StatError("separator ':' not found"))
            }
            guard let value = bytesOrNumber(GoText.trimSpace(line[(colon + 1)...])) else { continue }
            switch GoText.string(line[..<colon]) {
            case "MemTotal": total = value
            case "MemAvailable": available = value
            case "MemFree": free = value
            case "Buffers": buffers = value
            case "Cached": cached = value
            default: break
            }
        }
        // Go's unsigned arithmetic wraps; so does this.
        return .success(Memory(total: total, available: available ?? free &+ buffers &+ cached))
    }

    /// `parseBytesOrNumber`: a number, times 1024 when followed by `kB`; nil otherwise.
    private static func bytesOrNumber(_ value: ArraySlice<UInt8>) -> UInt64? {
        let parts = GoText.fields(value)
        guard let first = parts.first, case .success(let number) = GoNumbers.parseUInt64(first) else { return nil }
        guard parts.count >= 2 else { return number }
        return parts[1].elementsEqual("kB".utf8) ? number &* 1024 : nil
    }

    /// The CPU times of `/proc/stat`'s `cpu` line, in clock ticks.
    public struct CPUTimes: Equatable, Sendable {
        /// user + nice + system + idle + iowait + irq + softirq + steal (go-sysinfo's
        /// `CPUTimes.Total`; guest time is already inside user and nice).
        public var total: Double
        public var idle: Double
    }

    /// The `cpu` line's times, after procfs's `parseStat` checks: any line it reads (`cpu*`,
    /// `btime`, `intr`, `ctxt`, `processes`, `procs_*`, `softirq`) that does not parse fails all.
    public static func cpuTimes(_ bytes: [UInt8]) -> Result<CPUTimes, StatError> {
        var times = CPUTimes(total: 0, idle: 0)
        for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            let parts = GoText.fields(line)
            guard parts.count >= 2 else { continue }
            let key = GoText.string(parts[0])
            switch key {
            case "btime", "ctxt", "processes", "procs_running", "procs_blocked":
                if case .failure(let failure) = GoNumbers.parseUInt64(parts[1]) {
                    return .failure(parseError(parts[1], key, failure.message))
                }
            case "intr":
                for (index, count) in parts.dropFirst().enumerated() {
                    if case .failure(let failure) = GoNumbers.parseUInt64(count) {
                        return .failure(parseError(count, index == 0 ? "intr" : "intr\(index - 1)", failure.message))
                    }
                }
            case "softirq":
                if let failure = softIRQFailure(line) { return .failure(parseError(line, "softirq", failure)) }
            default:
                guard key.hasPrefix("cpu") else { continue }
                switch cpuLine(line) {
                case .failure(let error): return .failure(error)
                case .success(let values?): times = values
                case .success(nil): break
                }
            }
        }
        return .success(times)
    }

    /// A `cpu` or `cpuN` line: `%s` then up to ten `%f` (fewer is fine); the sum for `cpu`.
    private static func cpuLine(_ line: ArraySlice<UInt8>) -> Result<CPUTimes?, StatError> {
        var rest = line.drop(while: GoText.isSpace)
        let name = rest.prefix(while: { !GoText.isSpace($0) })
        rest = rest.dropFirst(name.count)
        var values: [Double] = []
        while values.count < 10 {
            rest = rest.drop(while: { GoText.isSpace($0) && $0 != UInt8(ascii: "\n") })
            guard !rest.isEmpty else { break }
            switch GoNumbers.scanFloat(rest) {
            case .failure(let failure): return .failure(parseError(line, "cpu", failure.message))
            case .success(let (value, length)):
                values.append(value)
                rest = rest.dropFirst(length)
            }
        }
        if name.elementsEqual("cpu".utf8) {
            let field = { (index: Int) in index < values.count ? values[index] : 0 }
            // user, nice, system, idle, iowait, irq, softirq, steal.
            let total = (0..<8).reduce(0.0) { $0 + field($1) }
            return .success(CPUTimes(total: total, idle: field(3)))
        }
        if case .failure(let failure) = GoNumbers.parseInt64(name.dropFirst(3)) {
            return .failure(parseError(line, "cpu/cpuid", failure.message))
        }
        return .success(nil)
    }

    /// Why a `softirq` line does not scan as `%s` and eleven `%d` (nil when it does).
    private static func softIRQFailure(_ line: ArraySlice<UInt8>) -> String? {
        let fields = GoText.fields(line).dropFirst()
        for index in 0..<11 {
            guard index < fields.count else { return "EOF" }
            let field = fields[fields.startIndex + index]
            let digits = field.prefix(while: { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
            guard !digits.isEmpty else { return "expected integer" }
            if case .failure(let failure) = GoNumbers.parseUInt64(digits) { return failure.message }
            if digits.count < field.count { return "expected integer" }
        }
        return nil
    }

    /// procfs's `ErrFileParse` wrapping: `Error Parsing File: couldn't parse "x" (btime): ...`.
    private static func parseError(_ text: ArraySlice<UInt8>, _ what: String, _ why: String) -> StatError {
        StatError("Error Parsing File: couldn't parse \(GoText.quote(text)) (\(what)): \(why)")
    }
}
