import AgentCore

/// A SKILL.md's front matter: the `---` block at its top, read as a YAML map.
///
/// `name` is required and must be a string; `description` is optional and must be a string
/// when present; other keys are ignored. The YAML read is the subset skills use: top-level
/// `key: value` pairs whose values are plain, single- or double-quoted, or block (`|`, `>`)
/// scalars, and nested maps, sequences and flow collections, which make the value not a
/// string. Plain values resolve as YAML 1.2's core schema does (`true`, `12`, `~` are not
/// strings).
public struct SkillFrontMatter: Sendable, Equatable {
    public var name: String
    public var description: String
    /// The text after the closing `---`, HTML comments removed, trimmed.
    public var body: String

    public init(name: String, description: String, body: String) {
        self.name = name
        self.description = description
        self.body = body
    }

    /// Why a SKILL.md has no usable front matter; the texts are the reference's.
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public var message: String
        public init(_ message: String) { self.message = message }
        public var description: String { message }
    }

    static let nameRequired = "frontmatter missing required 'name' field"

    /// Reads the front matter of a SKILL.md's text, and its body.
    public static func parse(_ text: String) throws(ParseError) -> SkillFrontMatter {
        try parse(utf8: Array(text.utf8))
    }

    /// Reads the front matter of a SKILL.md's bytes, line by line up to the closing `---`: the
    /// body is not looked at unless `readingBody` (else `body` is empty), so a 64 KiB file with a
    /// short front matter costs a short front matter.
    public static func parse(utf8 bytes: [UInt8], readingBody: Bool = true) throws(ParseError) -> SkillFrontMatter {
        let newline = UInt8(ascii: "\n")
        var lineStart = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        var frontLines: [String] = []
        var bodyStart: Int?
        var lineNumber = 0
        while true {
            let lineEnd = bytes[lineStart...].firstIndex(of: newline) ?? bytes.count
            let line = bytes[lineStart..<lineEnd]
            if lineNumber == 0 {
                guard isDelimiter(line) else { throw ParseError("missing opening frontmatter delimiter") }
            } else if isDelimiter(line) {
                bodyStart = min(lineEnd + 1, bytes.count)
                break
            } else {
                frontLines.append(String(decoding: line, as: UTF8.self))
            }
            guard lineEnd < bytes.count else { break }
            lineStart = lineEnd + 1
            lineNumber += 1
        }
        guard let bodyStart else { throw ParseError("missing closing frontmatter delimiter") }
        let map: [String: YAMLScalar]
        do {
            map = try FrontMatterYAML.parseMap(frontLines)
        } catch {
            throw ParseError("parse frontmatter YAML: \(error.message)")
        }
        func field(_ key: String) throws(ParseError) -> String? {
            guard let value = map[key] else { return nil }
            guard case .string(let text) = value else { throw ParseError("frontmatter field \(goQuote(key)) must be a string") }
            return text.trimmingTrailingLineBreaks
        }
        let found: String?
        do throws(ParseError) {
            found = try field("name")
        } catch {
            throw ParseError("\(nameRequired): \(error.message)")
        }
        guard let name = found, !name.isEmpty else { throw ParseError(nameRequired) }
        let description = try field("description") ?? ""
        guard readingBody else { return SkillFrontMatter(name: name, description: description, body: "") }
        let body = String(decoding: InstructionText.removingHTMLComments(utf8: bytes[bodyStart...]), as: UTF8.self).goTrimmed
        return SkillFrontMatter(name: name, description: description, body: body)
    }

    /// Whether a line, trimmed of white space, is `---`. Most lines are told at their first
    /// byte; only a line of dashes, white space and other non-ASCII bytes is decoded.
    static func isDelimiter(_ line: ArraySlice<UInt8>) -> Bool {
        var dashes = 0
        for byte in line {
            if byte == UInt8(ascii: "-") {
                dashes += 1
                if dashes > 3 { return false }
            } else if byte < 0x80, byte != UInt8(ascii: " "), !(0x09...0x0D).contains(byte) {
                return false
            }
        }
        return dashes == 3 && String(decoding: line, as: UTF8.self).goTrimmed == "---"
    }

    /// The skill-name rule: kebab-case, `^[a-z0-9]+(-[a-z0-9]+)*$`.
    public static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard let first = bytes.first, let last = bytes.last, first != UInt8(ascii: "-"), last != UInt8(ascii: "-") else { return false }
        var previousDash = false
        for byte in bytes {
            if byte == UInt8(ascii: "-") {
                if previousDash { return false }
                previousDash = true
            } else if (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                previousDash = false
            } else {
                return false
            }
        }
        return true
    }
}

extension String {
    var trimmingTrailingLineBreaks: String {
        var scalars = Substring(self).unicodeScalars
        while let last = scalars.last, last == "\n" || last == "\r" { scalars.removeLast() }
        return String(scalars)
    }
}
