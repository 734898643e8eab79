/// Parses a Go duration (`5m`, `100ms`, `1h30m`, `1.5s`, `0`), as `--timeout` takes it.
public enum GoDuration {
    public struct Invalid: Error, CustomStringConvertible {
        public var description: String
    }

    public static func parse(_ text: String) throws(Invalid) -> Duration {
        var rest = Substring(text)
        var negative = false
        if rest.first == "-" || rest.first == "+" {
            negative = rest.first == "-"
            rest = rest.dropFirst()
        }
        if rest == "0" { return .zero }
        guard !rest.isEmpty else { throw Invalid(description: "time: invalid duration \(goQuote(text))") }
        var total = Duration.zero
        while !rest.isEmpty {
            let number = rest.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
            guard !number.isEmpty, let value = Double(number) else { throw Invalid(description: "time: invalid duration \(goQuote(text))") }
            rest = rest.dropFirst(number.count)
            let unit = rest.prefix { !($0.isASCII && ($0.isNumber || $0 == ".")) }
            rest = rest.dropFirst(unit.count)
            let nanoseconds: Double
            switch unit {
            case "ns": nanoseconds = 1
            case "us", "µs", "μs": nanoseconds = 1e3
            case "ms": nanoseconds = 1e6
            case "s": nanoseconds = 1e9
            case "m": nanoseconds = 60e9
            case "h": nanoseconds = 3600e9
            case "": throw Invalid(description: "time: missing unit in duration \(goQuote(text))")
            default: throw Invalid(description: "time: unknown unit \(goQuote(String(unit))) in duration \(goQuote(text))")
            }
            let part = value * nanoseconds
            guard part < 9.2e18, total.components.seconds < 9_000_000_000 else {
                throw Invalid(description: "time: invalid duration \(goQuote(text))")
            }
            total += .nanoseconds(Int64(part))
        }
        return negative ? .zero - total : total
    }
}
