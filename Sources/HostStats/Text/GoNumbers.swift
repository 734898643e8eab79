/// Go's `strconv` number parsing as the reference's readers call it, with its error texts
/// (`strconv.ParseInt: parsing "max": invalid syntax`) and its two kinds of failure.
enum GoNumbers {
    /// Why a number did not parse (`strconv.ErrSyntax` or `strconv.ErrRange`).
    struct Failure: Error, Equatable {
        enum Kind: Equatable { case syntax, range }
        let kind: Kind
        let message: String
    }

    /// `strconv.ParseInt(text, 10, 64)`.
    static func parseInt64(_ text: ArraySlice<UInt8>) -> Result<Int64, Failure> {
        var digits = text
        var negative = false
        if let sign = digits.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
            negative = sign == UInt8(ascii: "-")
            digits = digits.dropFirst()
        }
        switch magnitude(digits) {
        case nil:
            return .failure(failure("ParseInt", text, .syntax))
        case let value?:
            let limit: UInt64 = negative ? UInt64(Int64.max) + 1 : UInt64(Int64.max)
            guard let value, value <= limit else { return .failure(failure("ParseInt", text, .range)) }
            return .success(negative ? Int64(truncatingIfNeeded: 0 &- value) : Int64(value))
        }
    }

    /// `strconv.ParseUint(text, 10, 64)` (no sign allowed).
    static func parseUInt64(_ text: ArraySlice<UInt8>) -> Result<UInt64, Failure> {
        switch magnitude(text) {
        case nil: return .failure(failure("ParseUint", text, .syntax))
        case let value?:
            guard let value else { return .failure(failure("ParseUint", text, .range)) }
            return .success(value)
        }
    }

    /// The decimal digits' value: nil when they are not all digits (or none), `.some(nil)`
    /// when they overflow 64 bits.
    private static func magnitude(_ digits: ArraySlice<UInt8>) -> UInt64?? {
        guard !digits.isEmpty else { return nil }
        var value: UInt64? = 0
        for byte in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            if let current = value {
                let (times, overflow1) = current.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
                value = overflow1 || overflow2 ? nil : sum
            }
        }
        return .some(value)
    }

    /// `fmt`'s `%f` on the front of `text` (its float token, then `strconv.ParseFloat`):
    /// the value and how many bytes it took, or the error `Sscanf` reports.
    static func scanFloat(_ text: ArraySlice<UInt8>) -> Result<(value: Double, length: Int), Failure> {
        let token = floatToken(text)
        let string = GoText.string(token)
        let lower = string.lowercased()
        if lower == "nan" || lower == "inf" || lower == "+inf" || lower == "-inf" {
            let value: Double = lower == "nan" ? .nan : (lower.hasPrefix("-") ? -.infinity : .infinity)
            return .success((value, token.count))
        }
        // Go wants a 'p' exponent on hexadecimal mantissas and takes `_` only after a prefix.
        let hex = lower.hasPrefix("0x") || lower.hasPrefix("+0x") || lower.hasPrefix("-0x")
        guard !string.contains("_"), !hex || lower.contains("p"), let value = Double(string) else {
            return .failure(failure("ParseFloat", token, .syntax))
        }
        guard value.isFinite else { return .failure(failure("ParseFloat", token, .range)) }
        return .success((value, token.count))
    }

    /// The bytes `fmt.(*ss).floatToken` accepts at the front of `text`.
    private static func floatToken(_ text: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var index = text.startIndex
        func accept(_ set: String) -> Bool {
            guard index < text.endIndex, set.utf8.contains(text[index]) else { return false }
            index += 1
            return true
        }
        // As Go: a partial "na" or "in" stays taken.
        if accept("nN"), accept("aA"), accept("nN") { return text[text.startIndex..<index] }
        _ = accept("+-")
        if accept("iI"), accept("nN"), accept("fF") { return text[text.startIndex..<index] }
        var digits = "0123456789_"
        var exponent = "eEpP"
        if accept("0"), accept("xX") {
            digits = "0123456789aAbBcCdDeEfF_"
            exponent = "pP"
        }
        while accept(digits) {}
        if accept(".") { while accept(digits) {} }
        if accept(exponent) {
            _ = accept("+-")
            while accept("0123456789_") {}
        }
        return text[text.startIndex..<index]
    }

    private static func failure(_ function: String, _ text: ArraySlice<UInt8>, _ kind: Failure.Kind) -> Failure {
        let why = kind == .syntax ? "invalid syntax" : "value out of range"
        return Failure(kind: kind, message: "strconv.\(function): parsing \(GoText.quote(text)): \(why)")
    }
}
