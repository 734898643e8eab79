#if canImport(Glibc)
import Glibc
#endif

/// Go's float formatting as the reference prints figures: `strconv.FormatFloat` with `'f'`
/// and the shortest digits, `encoding/json`'s number form, and a percent with no decimals.
public enum GoFloat {
    /// `strconv.FormatFloat(value, 'f', -1, 64)`: the shortest digits that read back as
    /// `value`, never in exponent form (`1e+21` is `1000000000000000000000`).
    public static func fixed(_ value: Double) -> String {
        guard let (negative, digits, point) = shortestDigits(value) else { return special(value) }
        var out = negative ? "-" : ""
        if point <= 0 {
            out += "0." + String(repeating: "0", count: -point) + digits
        } else if point >= digits.count {
            out += digits + String(repeating: "0", count: point - digits.count)
        } else {
            let split = digits.index(digits.startIndex, offsetBy: point)
            out += digits[..<split] + "." + digits[split...]
        }
        return out
    }

    /// How `encoding/json` writes a float64: `'f'` form, or `'e'` form below 1e-6 and from
    /// 1e21 on (`1e-7`, `1.5e+21`). Nil for NaN and the infinities, which Go refuses.
    public static func json(_ value: Double) -> String? {
        guard value.isFinite else { return nil }
        let magnitude = abs(value)
        guard magnitude != 0, magnitude < 1e-6 || magnitude >= 1e21 else { return fixed(value) }
        guard let (negative, digits, point) = shortestDigits(value) else { return nil }
        var mantissa = String(digits.prefix(1))
        if digits.count > 1 { mantissa += "." + digits.dropFirst() }
        let exponent = point - 1
        let exponentText = abs(exponent) < 10 && exponent > 0 ? "0\(exponent)" : "\(abs(exponent))"
        // Go writes e-07 and then trims it to e-7; positive exponents keep two digits.
        return (negative ? "-" : "") + mantissa + "e" + (exponent < 0 ? "-" : "+") + exponentText
    }

    /// `strconv.FormatFloat(value, 'f', 0, 64)`: rounded to a whole number, halves to even.
    public static func whole(_ value: Double) -> String {
        guard value.isFinite else { return special(value) }
        var buffer = [CChar](repeating: 0, count: 400)
        let count = withVaList([value]) { vsnprintf(&buffer, buffer.count, "%.0f", $0) }
        guard count > 0 else { return "0" }
        return String(decoding: buffer.prefix(min(Int(count), buffer.count - 1)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Go's `'g'` text for what JSON refuses: `NaN`, `+Inf`, `-Inf`.
    public static func special(_ value: Double) -> String {
        value.isNaN ? "NaN" : (value > 0 ? "+Inf" : "-Inf")
    }

    /// The shortest round-trip digits of a finite value (no leading or trailing zeros, "0"
    /// for zero) and where the decimal point goes: value = 0.digits × 10^point.
    static func shortestDigits(_ value: Double) -> (negative: Bool, digits: String, point: Int)? {
        guard value.isFinite else { return nil }
        let negative = value.sign == .minus
        // Swift's description is the shortest round-trip form too, in either notation.
        var text = Substring(abs(value).description)
        var exponent = 0
        if let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            exponent = Int(text[text.index(after: e)...]) ?? 0
            text = text[..<e]
        }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        let whole = parts.first ?? "0"
        let fraction = parts.count > 1 ? parts[1] : ""
        var digits = String(whole) + fraction
        var point = whole.count + exponent
        while digits.first == "0", digits.count > 1 {
            digits.removeFirst()
            point -= 1
        }
        while digits.last == "0", digits.count > 1 { digits.removeLast() }
        if digits == "0" { return (negative, "0", 1) }
        return (negative, digits, point)
    }
}
