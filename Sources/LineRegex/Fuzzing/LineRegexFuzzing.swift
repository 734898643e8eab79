/// The matcher's fuzz entry point, for the fuzz targets (`Fuzz/`, `make fuzz`): compiles and
/// runs arbitrary bytes and traps if an invariant breaks, so crashes and blow-ups surface
/// early. It exists for the fuzz targets only (LineRegexTests also runs it on random input).
public enum LineRegexFuzzing {
    /// Splits `data` at the first 0x00 byte into pattern and text (no 0x00: both are `data`),
    /// then checks determinism, the linear step bound and literal-search agreement.
    public static func fuzz(_ data: [UInt8]) {
        let split = data.firstIndex(of: 0)
        let patternBytes = Array(data[..<(split ?? data.endIndex)])
        let text = split.map { Array(data[($0 + 1)...]) } ?? data
        let pattern = String(decoding: patternBytes, as: UTF8.self)

        let first = Result { () throws(LineRegexError) in try LineRegex(pattern) }
        let second = Result { () throws(LineRegexError) in try LineRegex(pattern) }
        switch (first, second) {
        case (.success(let a), .success(let b)):
            precondition(a.programSize == b.programSize, "compile is not deterministic")
            precondition(a.programSize <= LineRegex.maxProgramSize, "program exceeds limit")
            let (matched, steps) = a.matchCountingSteps(text)
            precondition(steps <= a.stepBound(byteCount: text.count), "superlinear matching")
            precondition(b.matches(text) == matched, "match is not deterministic")
            // Wrapping in a non-capturing group must not change the answer.
            if let wrapped = try? LineRegex("(?:" + pattern + ")") {
                precondition(wrapped.matches(text) == matched, "(?:re) differs from re")
            }
            // (?:re)|(?:re) matches exactly when re does (groups scope flags like (?i)).
            if let doubled = try? LineRegex("(?:" + pattern + ")|(?:" + pattern + ")") {
                precondition(doubled.matches(text) == matched, "re|re differs from re")
            }
        case (.failure(let a), .failure(let b)):
            precondition(a == b, "compile errors are not deterministic")
            precondition(!a.description.isEmpty, "empty error message")
        default:
            preconditionFailure("compile result is not deterministic")
        }

        // An escaped literal must agree with a plain byte search.
        let literal = patternBytes.count > 64 ? Array(patternBytes.prefix(64)) : patternBytes
        let literalString = String(decoding: literal, as: UTF8.self)
        if !literalString.unicodeScalars.contains("\u{FFFD}") {
            let escaped = escape(literalString)
            if let regex = try? LineRegex(escaped) {
                precondition(
                    regex.matches(text) == contains(text, Array(literalString.utf8)),
                    "literal pattern disagrees with byte search")
            } else {
                preconditionFailure("escaped literal failed to compile")
            }
            if let viaQuote = try? LineRegex("\\Q" + literalString.replacing("\\E", with: "") + "\\E") {
                _ = viaQuote.matches(text)
            }
        }
    }

    /// Escapes every ASCII punctuation character so `s` is matched literally.
    static func escape(_ s: String) -> String {
        var out = ""
        for scalar in s.unicodeScalars {
            if scalar.isASCII && !RegexParser.isWordByte(UInt8(scalar.value)) && scalar.value > 0x20 {
                out.append("\\")
            }
            out.unicodeScalars.append(scalar)
        }
        return out
    }

    static func contains(_ hay: [UInt8], _ needle: [UInt8]) -> Bool {
        if needle.isEmpty { return true }
        guard hay.count >= needle.count else { return false }
        for start in 0...(hay.count - needle.count) where hay[start..<(start + needle.count)].elementsEqual(needle) {
            return true
        }
        return false
    }
}
