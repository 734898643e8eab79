/// Parses a Go duration (`5m`, `100ms`, `1h30m`, `1.5s`, `0`), as `--timeout` takes it.
public enum GoDuration {
    public struct Invalid: Error, CustomStringConvertible {
        public var description: String
    }

    public static func parse(_ text: String) throws(Invalid) -> Duration {
        // Go's time.ParseDuration: integer nanoseconds with its overflow checks, so every
        // value up to 2562047h47m16.854775807s is taken, and nothing past it.
        let invalid = Invalid(description: "time: invalid duration \(goQuote(text))")
        var rest = Substring(text).utf8
        var negative = false
        if let sign = rest.first, sign == UInt8(ascii: "-") || sign == UInt8(ascii: "+") {
            negative = sign == UInt8(ascii: "-")
            rest = rest.dropFirst()
        }
        if rest.elementsEqual("0".utf8) { return .zero }
        guard !rest.isEmpty else { throw invalid }
        let limit: UInt64 = 1 << 63
        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        var total: UInt64 = 0
        while !rest.isEmpty {
            // The whole part, overflow refused.
            var whole: UInt64 = 0
            let digits = rest.prefix(while: isDigit)
            for digit in digits {
                guard whole <= limit / 10 else { throw invalid }
                whole = whole * 10 + UInt64(digit - UInt8(ascii: "0"))
                guard whole <= limit else { throw invalid }
            }
            rest = rest.dropFirst(digits.count)
            // The fraction: digits past what fits are ignored, as Go does.
            var fraction: UInt64 = 0
            var scale = 1.0
            var fractionDigits = 0
            if rest.first == UInt8(ascii: ".") {
                rest = rest.dropFirst()
                let places = rest.prefix(while: isDigit)
                fractionDigits = places.count
                var overflowed = false
                for digit in places where !overflowed {
                    guard fraction <= (limit - 1) / 10, fraction * 10 + UInt64(digit - UInt8(ascii: "0")) <= limit else {
                        overflowed = true
                        continue
                    }
                    fraction = fraction * 10 + UInt64(digit - UInt8(ascii: "0"))
                    scale *= 10
                }
                rest = rest.dropFirst(places.count)
            }
            guard !digits.isEmpty || fractionDigits > 0 else { throw invalid }
            let unitText = rest.prefix { !(isDigit($0) || $0 == UInt8(ascii: ".")) }
            rest = rest.dropFirst(unitText.count)
            let unit: UInt64
            switch String(decoding: unitText, as: UTF8.self) {
            case "ns": unit = 1
            case "us", "µs", "μs": unit = 1_000
            case "ms": unit = 1_000_000
            case "s": unit = 1_000_000_000
            case "m": unit = 60_000_000_000
            case "h": unit = 3_600_000_000_000
            case "": throw Invalid(description: "time: missing unit in duration \(goQuote(text))")
            case let other: throw Invalid(description: "time: unknown unit \(goQuote(other)) in duration \(goQuote(text))")
            }
            guard whole <= limit / unit else { throw invalid }
            var value = whole * unit
            if fraction > 0 {
                value += UInt64(Double(fraction) * (Double(unit) / scale))
                guard value <= limit else { throw invalid }
            }
            total += value
            guard total <= limit else { throw invalid }
        }
        if negative { return .nanoseconds(total == limit ? Int64.min : -Int64(total)) }
        guard total <= limit - 1 else { throw invalid }
        return .nanoseconds(Int64(total))
    }
}
