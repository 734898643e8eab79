import ChatContext

/// A SKILL.md's front matter (`SkillFrontMatter.parse` and the YAML subset behind it) and
/// the instruction-text rules (`InstructionText`).
///
/// Any text parses or fails with one of the reference's messages; a parsed name is
/// non-empty, and neither it nor the description ends in CR or LF; the body is trimmed.
/// A name and description written into front matter (double-quoted with escapes,
/// single-quoted, plain kebab-case, a literal block), among comments and other keys, with
/// LF or CRLF lines and an optional BOM, read back as themselves. Sanitised text holds no
/// CR and none of the invisible characters, is trimmed and never longer; without `<!--` it
/// is exactly the plain rules applied in turn; the first line has no line break.
public func fuzzFrontMatter(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    if input.byte() % 2 == 0 {
        let text = String(decoding: input.rest(), as: UTF8.self)
        checkParse(text)
        checkInstructionText(text)
    } else {
        roundTrip(&input)
    }
    return 0
}

private let errorPrefixes = [
    "missing opening frontmatter delimiter", "missing closing frontmatter delimiter", "parse frontmatter YAML: ",
    "frontmatter missing required 'name' field", "frontmatter field \"description\" must be a string",
]

private func checkParse(_ text: String) {
    let first = Result { () throws(SkillFrontMatter.ParseError) in try SkillFrontMatter.parse(text) }
    let second = Result { () throws(SkillFrontMatter.ParseError) in try SkillFrontMatter.parse(text) }
    require(first == second, "parsing is not deterministic")
    switch first {
    case .failure(let error):
        require(errorPrefixes.contains { error.message.hasPrefix($0) }, "an unknown error: \(error.message)")
    case .success(let front):
        require(!front.name.isEmpty, "an empty name")
        for (field, value) in [("name", front.name), ("description", front.description)] {
            require(
                value.unicodeScalars.last != "\n" && value.unicodeScalars.last != "\r",
                "the \(field) ends in a line break: \(value.debugDescription)")
        }
        require(isTrimmed(front.body), "the body is not trimmed: \(front.body.debugDescription)")
        if SkillFrontMatter.isValidName(front.name) {
            let parts = front.name.split(separator: "-", omittingEmptySubsequences: false)
            require(
                parts.allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) } },
                "\(front.name.debugDescription) passed as kebab-case")
        }
    }
}

private func isTrimmed(_ text: String) -> Bool {
    guard let first = text.unicodeScalars.first, let last = text.unicodeScalars.last else { return true }
    return !first.properties.isWhitespace && !last.properties.isWhitespace
}

/// The characters the sanitiser removes, listed here apart from the agent's own table.
private func invisible(_ scalar: Unicode.Scalar) -> Bool {
    let ranges: [ClosedRange<UInt32>] = [
        0x00AD...0x00AD, 0x034F...0x034F, 0x061C...0x061C, 0x070F...0x070F, 0x115F...0x1160, 0x17B4...0x17B5,
        0x180B...0x180F, 0x200B...0x200B, 0x200D...0x200F, 0x202A...0x202E, 0x2060...0x206F, 0x3164...0x3164,
        0xFE00...0xFE0F, 0xFEFF...0xFEFF, 0xFFA0...0xFFA0, 0xFFF0...0xFFF8,
    ]
    return ranges.contains { $0.contains(scalar.value) }
}

private func checkInstructionText(_ text: String) {
    let clean = InstructionText.sanitized(text)
    require(!clean.unicodeScalars.contains("\r"), "a CR survived")
    require(!clean.unicodeScalars.contains(where: invisible), "an invisible character survived")
    require(isTrimmed(clean), "sanitised text is not trimmed")
    require(clean.unicodeScalars.count <= text.unicodeScalars.count, "sanitised text grew")
    for scalar in text.unicodeScalars.prefix(64) {
        require(InstructionText.isInvisible(scalar) == invisible(scalar), "U+\(String(scalar.value, radix: 16)) misclassified")
    }
    if !containsBytes(text, "<!--") {
        // CRLF and lone CR to LF, invisible characters out, trimmed: in turn, by hand.
        var scalars = Array(text.unicodeScalars)
        var normal: [Unicode.Scalar] = []
        var index = 0
        while index < scalars.count {
            if scalars[index] == "\r" {
                normal.append("\n")
                if index + 1 < scalars.count, scalars[index + 1] == "\n" { index += 1 }
            } else {
                normal.append(scalars[index])
            }
            index += 1
        }
        scalars = normal.filter { !invisible($0) }
        while let last = scalars.last, last.properties.isWhitespace { scalars.removeLast() }
        while let first = scalars.first, first.properties.isWhitespace { scalars.removeFirst() }
        var want = String.UnicodeScalarView()
        want.append(contentsOf: scalars)
        require(clean.unicodeScalars.elementsEqual(want), "sanitised \(text.debugDescription) to \(clean.debugDescription)")
    }
    if !containsBytes(text, "-->") || !containsBytes(text, "<!--") {
        require(InstructionText.removingHTMLComments(text) == text, "text without a whole comment changed")
    }
    let line = InstructionText.firstLine(text)
    require(!line.contains("\n") && isTrimmed(line), "the first line \(line.debugDescription)")
}

/// A byte search, as Go's regexp runs (`String.contains` compares characters, and a
/// combining mark after `-` makes another character).
private func containsBytes(_ text: String, _ needle: String) -> Bool {
    let bytes = Array(text.utf8), pattern = Array(needle.utf8)
    guard bytes.count >= pattern.count else { return false }
    return (0...(bytes.count - pattern.count)).contains { bytes[$0..<($0 + pattern.count)].elementsEqual(pattern) }
}

// MARK: Round trip

/// A YAML double-quoted scalar: `"` and `\` escaped, everything outside printable ASCII as
/// `\x`, `\u` or `\U`.
private func doubleQuoted(_ text: String, style: UInt8) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n" where style & 1 == 1: out += "\\n"
        case "\t" where style & 2 == 2: out += "\\t"
        case " "..."~": out.unicodeScalars.append(scalar)
        default:
            if scalar.value < 0x100, style & 4 == 4 {
                out += "\\x" + hex(scalar.value, width: 2)
            } else if scalar.value < 0x10000 {
                out += "\\u" + hex(scalar.value, width: 4)
            } else {
                out += "\\U" + hex(scalar.value, width: 8)
            }
        }
    }
    return out + "\""
}

private func hex(_ value: UInt32, width: Int) -> String {
    let digits = String(value, radix: 16, uppercase: value % 2 == 0)
    return String(repeating: "0", count: max(0, width - digits.count)) + digits
}

private func roundTrip(_ input: inout FuzzInput) {
    let options = input.byte()
    let crlf = options & 1 == 1, bom = options & 2 == 2
    let nameStyle = input.byte() % 3
    let descriptionStyle = input.byte() % 3
    let escapes = input.byte()

    var name = String(decoding: input.data(maxLength: 40), as: UTF8.self)
    let nameLine: String
    switch nameStyle {
    case 0:
        nameLine = "name: " + doubleQuoted(name, style: escapes)
    case 1:
        // Single-quoted: printable ASCII, `'` doubled.
        name = String(String.UnicodeScalarView(name.unicodeScalars.filter { (" "..."~").contains($0) }))
        nameLine = "name: '" + name.replacing("'", with: "''") + "'"
    default:
        // Plain: kebab-case (YAML reads some of those as numbers or booleans).
        let alphabet = Array("abz09-".utf8)
        name = String(decoding: Array(name.utf8).map { alphabet[Int($0) % alphabet.count] }, as: UTF8.self)
        nameLine = "name: " + name
    }

    var description = String(decoding: input.data(maxLength: 120), as: UTF8.self)
    var descriptionLines: [String]
    switch descriptionStyle {
    case 0:
        descriptionLines = ["description: " + doubleQuoted(description, style: escapes >> 3)]
    case 1:
        // A literal block of printable lines, each starting with a non-space; a line that
        // trims to `---` would close the front matter (as in the reference).
        let lines = description.split(separator: "\n").map { line in
            String(String.UnicodeScalarView(line.unicodeScalars.filter { ("!"..."~").contains($0) || $0 == " " }))
        }.filter { !$0.isEmpty && !$0.hasPrefix(" ") && !($0.hasPrefix("---") && $0.dropFirst(3).allSatisfy { $0 == " " }) }
        description = lines.joined(separator: "\n")
        descriptionLines = [escapes & 0x80 == 0 ? "description: |-" : "description: |"] + lines.map { "  " + $0 }
        if lines.isEmpty { descriptionLines = [] }
    default:
        descriptionLines = []
        description = ""
    }

    var document = ["---"]
    let extras = [
        "# a comment", "metadata:", "  owner: me", "tags: [a, b]", "other: |", "  text: not a key", "version: 1.0", "",
        "empty:", "list:", "  - one",
    ]
    let extraCount = Int(input.byte() % 4)
    var pieces = [nameLine] + (descriptionLines.isEmpty ? [] : [descriptionLines.joined(separator: "\n")])
    var used = Set<String>()
    for _ in 0..<extraCount {
        let at = Int(input.byte()) % (pieces.count + 1)
        let extra = extras[Int(input.byte()) % extras.count]
        // A key given twice is an error of its own.
        guard extra.isEmpty || extra.hasPrefix("#") || used.insert(extra).inserted else { continue }
        // An indented line belongs to the key above it; only whole entries are moved around.
        switch extra {
        case "metadata:": pieces.insert("metadata:\n  owner: me", at: at)
        case "other: |": pieces.insert("other: |\n  text: not a key", at: at)
        case "list:": pieces.insert("list:\n  - one", at: at)
        case "  owner: me", "  text: not a key", "  - one": continue
        default: pieces.insert(extra, at: at)
        }
    }
    document += pieces
    document.append("---")
    document.append(String(decoding: input.rest(), as: UTF8.self).replacing("\n---", with: "\n-- -"))
    var text = document.joined(separator: "\n")
    if crlf { text = text.replacing("\n", with: "\r\n") }
    if bom { text = "\u{FEFF}" + text }

    let wantName = trimmedLineBreaks(name)
    let result = Result { () throws(SkillFrontMatter.ParseError) in try SkillFrontMatter.parse(text) }
    switch result {
    case .success(let front):
        require(front.name == wantName, "name \(front.name.debugDescription), want \(wantName.debugDescription) from \(text.debugDescription)")
        require(
            front.description == trimmedLineBreaks(description),
            "description \(front.description.debugDescription), want \(description.debugDescription) from \(text.debugDescription)")
    case .failure(let error):
        if wantName.isEmpty {
            require(error.message.hasPrefix("frontmatter missing required 'name' field"), "an empty name: \(error.message)")
        } else {
            // Only a plain name YAML reads as another type may fail.
            require(
                nameStyle == 2 && error.message.hasSuffix("frontmatter field \"name\" must be a string") && readsAsNonString(name),
                "\(error.message) for \(text.debugDescription)")
        }
    }
}

private func trimmedLineBreaks(_ text: String) -> String {
    var scalars = Array(text.unicodeScalars)
    while let last = scalars.last, last == "\n" || last == "\r" { scalars.removeLast() }
    var out = String.UnicodeScalarView()
    out.append(contentsOf: scalars)
    return String(out)
}

/// Kebab-case text YAML 1.2's core schema reads as an integer or a float.
private func readsAsNonString(_ signed: String) -> Bool {
    let text = signed.hasPrefix("-") ? String(signed.dropFirst()) : signed
    let digits = text.allSatisfy { $0.isASCII && $0.isNumber }
    if !text.isEmpty, digits { return true }
    if text.hasPrefix("0b") || text.hasPrefix("0x") || text.hasPrefix("0o") {
        let body = text.dropFirst(2)
        return !body.isEmpty && body.allSatisfy { $0.isHexDigit && !$0.isUppercase }
    }
    // Digits, `e`, optional `-`, digits.
    let parts = text.split(separator: "e", omittingEmptySubsequences: false)
    if parts.count == 2, !parts[0].isEmpty, parts[0].allSatisfy({ $0.isASCII && $0.isNumber }) {
        let exponent = parts[1].hasPrefix("-") ? parts[1].dropFirst() : parts[1]
        return !exponent.isEmpty && exponent.allSatisfy { $0.isASCII && $0.isNumber }
    }
    return false
}
