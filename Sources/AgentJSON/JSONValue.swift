/// A parsed JSON value.
///
/// The agent's request decoding follows Go's `encoding/json`: only the
/// first value is read and trailing bytes are ignored, unknown keys are ignored, keys match
/// case-insensitively, and `null` leaves a field unset. Foundation's decoder differs on all
/// four, so requests are parsed with this small parser instead.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSONValue])
    /// Members in document order; duplicates kept, the last one wins on lookup (as in Go).
    case object([(String, JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// The Go name of this value's kind, as used in Go's unmarshal errors.
    public var goKind: String {
        switch self {
        case .null: return "null"
        case .bool: return "bool"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    /// Parses the first JSON value in `bytes`, ignoring what follows it.
    public static func parseFirst(_ bytes: some Collection<UInt8>) throws(JSONSyntaxError) -> JSONValue {
        var parser = JSONParser(Array(bytes), wholeInput: false)
        return try parser.parseDocument()
    }

    /// Parses `bytes` as exactly one JSON value (whitespace around it allowed), as Go's
    /// `json.Unmarshal` does: empty input and trailing bytes are errors.
    public static func parseWhole(_ bytes: some Collection<UInt8>) throws(JSONSyntaxError) -> JSONValue {
        var parser = JSONParser(Array(bytes), wholeInput: true)
        return try parser.parseWholeDocument()
    }
}

/// A syntax error, worded like Go's.
public struct JSONSyntaxError: Error, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }

    /// Go's `json.Decoder` on input that ends inside a value (`io.ErrUnexpectedEOF`).
    public static let unexpectedEOF = "unexpected EOF"
    /// Go's `json.Unmarshal` on input that ends before its value does.
    public static let unexpectedEndOfInput = "unexpected end of JSON input"
}

/// A recursive-descent parser; nesting is bounded so hostile input cannot exhaust the stack.
struct JSONParser {
    static let maxDepth = 256

    private let bytes: [UInt8]
    /// `json.Unmarshal`'s errors (else one `Decoder.Decode`'s) for input that ends too soon.
    private let wholeInput: Bool
    private var index = 0
    private var depth = 0

    init(_ bytes: [UInt8], wholeInput: Bool) {
        self.bytes = bytes
        self.wholeInput = wholeInput
    }

    mutating func parseDocument() throws(JSONSyntaxError) -> JSONValue {
        skipWhitespace()
        if index >= bytes.count { throw JSONSyntaxError("EOF") }
        return try parseValue(context: "looking for beginning of value")
    }

    mutating func parseWholeDocument() throws(JSONSyntaxError) -> JSONValue {
        skipWhitespace()
        if index >= bytes.count { throw JSONSyntaxError(JSONSyntaxError.unexpectedEndOfInput) }
        let value = try parseValue(context: "looking for beginning of value")
        skipWhitespace()
        if index < bytes.count { throw invalid(bytes[index], "after top-level value") }
        return value
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private func invalid(_ byte: UInt8, _ context: String) -> JSONSyntaxError {
        JSONSyntaxError("invalid character \(Self.quoteChar(byte)) \(context)")
    }

    /// The error for input that ends too soon. A decoder says `unexpected EOF`. `json.Unmarshal`
    /// ends its scan with a blank, which a literal, number or escape cut short refuses in the
    /// words `refusingBlank` gives, and which elsewhere leaves `unexpected end of JSON input`.
    private func truncated(refusingBlank context: String? = nil) -> JSONSyntaxError {
        guard wholeInput else { return JSONSyntaxError(JSONSyntaxError.unexpectedEOF) }
        guard let context else { return JSONSyntaxError(JSONSyntaxError.unexpectedEndOfInput) }
        return invalid(UInt8(ascii: " "), context)
    }

    /// Go's `quoteChar`: the byte as the rune of the same value, quoted as `strconv.Quote`
    /// quotes it, between single quotes (`'\n'`, `'\x01'`, `'\\'`, `'\u0080'`, `'ï'`).
    static func quoteChar(_ byte: UInt8) -> String {
        let inner: String
        switch byte {
        case UInt8(ascii: "'"): inner = "\\'"
        case UInt8(ascii: "\\"): inner = "\\\\"
        case 0x07: inner = "\\a"
        case 0x08: inner = "\\b"
        case 0x09: inner = "\\t"
        case 0x0A: inner = "\\n"
        case 0x0B: inner = "\\v"
        case 0x0C: inner = "\\f"
        case 0x0D: inner = "\\r"
        case 0x00..<0x20, 0x7F: inner = "\\x" + zeroPadded(byte, width: 2, radix: 16)
        // C1 controls, no-break space and soft hyphen: not printable for Go.
        case 0x80...0xA0, 0xAD: inner = "\\u" + zeroPadded(byte, width: 4, radix: 16)
        default: inner = String(Unicode.Scalar(byte))
        }
        return "'" + inner + "'"
    }

    private mutating func parseValue(context: String) throws(JSONSyntaxError) -> JSONValue {
        skipWhitespace()
        guard index < bytes.count else { throw truncated() }
        let byte = bytes[index]
        switch byte {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw invalid(byte, context)
        }
    }

    private mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        if depth > JSONParser.maxDepth { throw JSONSyntaxError("exceeded max depth") }
    }

    private mutating func parseObject() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var members: [(String, JSONValue)] = []
        skipWhitespace()
        guard index < bytes.count else { throw truncated() }
        if bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count else { throw truncated() }
            guard bytes[index] == UInt8(ascii: "\"") else {
                throw invalid(bytes[index], "looking for beginning of object key string")
            }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count else { throw truncated() }
            guard bytes[index] == UInt8(ascii: ":") else { throw invalid(bytes[index], "after object key") }
            index += 1
            let value = try parseValue(context: "looking for beginning of value")
            members.append((key, value))
            skipWhitespace()
            guard index < bytes.count else { throw truncated() }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"): index += 1; return .object(members)
            default: throw invalid(bytes[index], "after object key:value pair")
            }
        }
    }

    private mutating func parseArray() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        guard index < bytes.count else { throw truncated() }
        if bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(items)
        }
        while true {
            items.append(try parseValue(context: "looking for beginning of value"))
            skipWhitespace()
            guard index < bytes.count else { throw truncated() }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"): index += 1; return .array(items)
            default: throw invalid(bytes[index], "after array element")
            }
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONSyntaxError) {
        let expected = UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        for (offset, want) in expected.enumerated() {
            let got = index + offset < bytes.count ? bytes[index + offset] : nil
            if got == want { continue }
            let context = "in literal \(literal) (expecting '\(Character(Unicode.Scalar(want)))')"
            guard let got else { throw truncated(refusingBlank: context) }
            throw invalid(got, context)
        }
        index += expected.count
    }

    private mutating func parseNumber() throws(JSONSyntaxError) -> String {
        let start = index
        func digits(_ p: inout JSONParser) -> Int {
            let s = p.index
            while p.index < p.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(p.bytes[p.index]) { p.index += 1 }
            return p.index - s
        }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw truncated(refusingBlank: "in numeric literal") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if digits(&self) == 0 {
            throw invalid(bytes[index], "in numeric literal")
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count else { throw truncated(refusingBlank: "after decimal point in numeric literal") }
            if digits(&self) == 0 { throw invalid(bytes[index], "after decimal point in numeric literal") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count else { throw truncated(refusingBlank: "in exponent of numeric literal") }
            if digits(&self) == 0 { throw invalid(bytes[index], "in exponent of numeric literal") }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func parseString() throws(JSONSyntaxError) -> String {
        index += 1
        var scalars = String.UnicodeScalarView()
        var runStart = index
        func flushRun(_ p: JSONParser, _ upTo: Int, into view: inout String.UnicodeScalarView) {
            if runStart < upTo {
                // Each invalid UTF-8 byte becomes U+FFFD, as in Go.
                view.append(contentsOf: String(goDecoding: p.bytes[runStart..<upTo]).unicodeScalars)
            }
        }
        while true {
            guard index < bytes.count else { throw truncated() }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                flushRun(self, index, into: &scalars)
                index += 1
                return String(scalars)
            }
            if byte < 0x20 { throw invalid(byte, "in string literal") }
            if byte != UInt8(ascii: "\\") {
                index += 1
                continue
            }
            flushRun(self, index, into: &scalars)
            index += 1
            guard index < bytes.count else { throw truncated(refusingBlank: "in string escape code") }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "/"): scalars.append("/")
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                var unit = try parseHex4()
                if (0xD800..<0xDC00).contains(unit), index + 1 < bytes.count,
                    bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                {
                    let save = index
                    index += 2
                    let low = try parseHex4()
                    if (0xDC00..<0xE000).contains(low) {
                        unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    } else {
                        index = save
                    }
                }
                scalars.append(Unicode.Scalar(unit) ?? "\u{FFFD}")
            default:
                throw invalid(escape, "in string escape code")
            }
            runStart = index
        }
    }

    private mutating func parseHex4() throws(JSONSyntaxError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard index < bytes.count else { throw truncated(refusingBlank: "in \\u hexadecimal character escape") }
            let b = bytes[index]
            let digit: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - UInt8(ascii: "A") + 10)
            default: throw invalid(b, "in \\u hexadecimal character escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }
}

extension JSONValue {
    /// An object member (the last of duplicates, as in Go); nil for other kinds.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.last { $0.0 == key }?.1
    }

    /// The string, if this is one.
    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// The elements, if this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let items) = self { return items }
        return nil
    }

    /// The number as an integer, if this is an integral number.
    public var intValue: Int? {
        if case .number(let text) = self { return Int(text) }
        return nil
    }
}
