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

    /// Reads the front matter of a SKILL.md's text.
    public static func parse(_ text: String) throws(ParseError) -> SkillFrontMatter {
        var bytes = Array(text.utf8)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            .map { String(decoding: $0, as: UTF8.self) }
        guard let first = lines.first, first.goTrimmed == "---" else {
            throw ParseError("missing opening frontmatter delimiter")
        }
        guard let closing = lines.indices.dropFirst().first(where: { lines[$0].goTrimmed == "---" }) else {
            throw ParseError("missing closing frontmatter delimiter")
        }
        let map: [String: YAMLScalar]
        do {
            map = try FrontMatterYAML.parseMap(Array(lines[1..<closing]))
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
        let body = InstructionText.removingHTMLComments(lines[(closing + 1)...].joined(separator: "\n")).goTrimmed
        return SkillFrontMatter(name: name, description: description, body: body)
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
