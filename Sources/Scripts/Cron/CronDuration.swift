/// Go's duration syntax (`time.ParseDuration`), for `@every`: an optional sign, then one or
/// more decimal numbers each with a unit (`ns`, `us`/`µs`/`μs`, `ms`, `s`, `m`, `h`), as in
/// `1h30m`, `1.5s` or `500ms`; a bare `0` is zero. Read with Go's limits: a total beyond
/// about 292 years is refused.
enum CronDuration {
    enum Failure: Error, Equatable {
        case invalid
        case missingUnit
        case unknownUnit(String)

        var reason: String {
            switch self {
            case .invalid: "not a duration (write e.g. 90s, 1m30s, 1h)"
            case .missingUnit: "a number without a unit (ns, us, ms, s, m or h)"
            case .unknownUnit(let unit): "unknown unit \(CronError.quoted(unit)) (ns, us, ms, s, m or h)"
            }
        }
    }

    static let limit: UInt64 = 1 << 63

    /// The duration in nanoseconds.
    static func nanoseconds(_ text: Substring) throws(Failure) -> Int64 {
        var rest = ArraySlice(text.utf8)
        var negative = false
        if let sign = rest.first, sign == UInt8(ascii: "-") || sign == UInt8(ascii: "+") {
            negative = sign == UInt8(ascii: "-")
            rest = rest.dropFirst()
        }
        if rest.elementsEqual("0".utf8) { return 0 }
        guard !rest.isEmpty else { throw .invalid }

        var total: UInt64 = 0
        while let first = rest.first {
            guard first == UInt8(ascii: ".") || isDigit(first) else { throw .invalid }
            // Whole part.
            var value: UInt64 = 0
            let before = rest.count
            while let byte = rest.first, isDigit(byte) {
                guard value <= limit / 10 else { throw .invalid }
                value = value * 10 + UInt64(byte - UInt8(ascii: "0"))
                guard value <= limit else { throw .invalid }
                rest = rest.dropFirst()
            }
            let hasWhole = rest.count != before
            // Fraction: digits past 2^63 are read and ignored.
            var fraction: UInt64 = 0
            var scale = 1.0
            var hasFraction = false
            if rest.first == UInt8(ascii: ".") {
                rest = rest.dropFirst()
                var overflowed = false
                while let byte = rest.first, isDigit(byte) {
                    hasFraction = true
                    rest = rest.dropFirst()
                    if overflowed { continue }
                    guard fraction <= (limit - 1) / 10 else {
                        overflowed = true
                        continue
                    }
                    let next = fraction * 10 + UInt64(byte - UInt8(ascii: "0"))
                    guard next <= limit else {
                        overflowed = true
                        continue
                    }
                    fraction = next
                    scale *= 10
                }
            }
            guard hasWhole || hasFraction else { throw .invalid }
            // Unit: everything up to the next number.
            let unitEnd = rest.firstIndex { $0 == UInt8(ascii: ".") || isDigit($0) } ?? rest.endIndex
            guard unitEnd > rest.startIndex else { throw .missingUnit }
            let unitBytes = rest[..<unitEnd]
            rest = rest[unitEnd...]
            guard let unit = unitNanoseconds(unitBytes) else {
                throw .unknownUnit(String(decoding: unitBytes, as: UTF8.self))
            }
            guard value <= limit / unit else { throw .invalid }
            value *= unit
            if fraction > 0 {
                value += UInt64(Double(fraction) * (Double(unit) / scale))
                guard value <= limit else { throw .invalid }
            }
            // Checked before the addition: two parts of 2^63 each would overflow UInt64.
            guard value <= limit - total else { throw .invalid }
            total += value
        }
        if negative { return Int64(bitPattern: 0 &- total) }
        guard total <= UInt64(Int64.max) else { throw .invalid }
        return Int64(total)
    }

    static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    static let units: [(name: [UInt8], nanoseconds: UInt64)] = [
        (Array("ns".utf8), 1), (Array("us".utf8), 1000), (Array("\u{B5}s".utf8), 1000), (Array("\u{3BC}s".utf8), 1000),
        (Array("ms".utf8), 1_000_000), (Array("s".utf8), 1_000_000_000), (Array("m".utf8), 60_000_000_000),
        (Array("h".utf8), 3_600_000_000_000),
    ]

    /// Compared byte for byte, as Go does (no Unicode equivalence).
    static func unitNanoseconds(_ unit: ArraySlice<UInt8>) -> UInt64? {
        units.first { $0.name.elementsEqual(unit) }?.nanoseconds
    }
}
