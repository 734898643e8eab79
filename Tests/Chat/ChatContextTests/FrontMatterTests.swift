import ChatContext
import Testing

/// SKILL.md front matter: the YAML a skill uses, and the reference's errors.
struct FrontMatterTests {
    func parse(_ text: String) -> Result<SkillFrontMatter, SkillFrontMatter.ParseError> {
        Result { () throws(SkillFrontMatter.ParseError) in try SkillFrontMatter.parse(text) }
    }

    func error(_ text: String) -> String? {
        if case .failure(let error) = parse(text) { return error.message }
        return nil
    }

    @Test func plainQuotedAndBlockValues() throws {
        let simple = try SkillFrontMatter.parse("---\nname: my-skill\ndescription: Does a thing\n---\nBody <!-- hidden -->text\n")
        #expect(simple == SkillFrontMatter(name: "my-skill", description: "Does a thing", body: "Body text"))

        let bom = try SkillFrontMatter.parse("\u{FEFF}---\r\nname: \"a-b\"\r\ndescription: 'it''s # not a comment'\r\n---\r\n")
        #expect(bom.name == "a-b")
        #expect(bom.description == "it's # not a comment")

        let folded = try SkillFrontMatter.parse("---\nname: x\ndescription: >\n  one\n  two\n\n  three\nmetadata:\n  owner: me\n  tags: [a, b]\n---\n")
        #expect(folded.description == "one two\nthree")

        let literal = try SkillFrontMatter.parse("---\nname: x\ndescription: |-\n  line 1\n  line 2\n---\n")
        #expect(literal.description == "line 1\nline 2")

        let plain = try SkillFrontMatter.parse("---\nname: x # a comment\ndescription: first\n  second  \n---\n")
        #expect(plain.name == "x")
        #expect(plain.description == "first second")

        let escaped = try SkillFrontMatter.parse("---\nname: x\ndescription: \"tab\\there \\u00e9\"\n---\n")
        #expect(escaped.description == "tab\there é")

        let dated = try SkillFrontMatter.parse("---\nname: x\ndescription: 2024-01-02\n---\n")
        #expect(dated.description == "2024-01-02", "timestamps stay strings")
    }

    @Test func errorsAreTheReferences() {
        #expect(error("name: x\n") == "missing opening frontmatter delimiter")
        #expect(error("---\nname: x\n") == "missing closing frontmatter delimiter")
        #expect(error("---\ndescription: d\n---\n") == "frontmatter missing required 'name' field")
        #expect(error("---\nname: \"\"\n---\n") == "frontmatter missing required 'name' field")
        #expect(error("---\nname: 123\n---\n") == "frontmatter missing required 'name' field: frontmatter field \"name\" must be a string")
        #expect(error("---\nname:\n---\n") == "frontmatter missing required 'name' field: frontmatter field \"name\" must be a string")
        #expect(error("---\nname: x\ndescription: true\n---\n") == "frontmatter field \"description\" must be a string")
        #expect(error("---\nname: x\ndescription:\n  - a\n---\n") == "frontmatter field \"description\" must be a string")
        #expect(error("---\nname: x\ndescription: use it: now\n---\n")?.hasPrefix("parse frontmatter YAML: yaml: line 3: mapping values") == true)
        #expect(error("---\nname: x\nname: y\n---\n")?.hasPrefix("parse frontmatter YAML: ") == true)
        #expect(error("---\n- a\n---\n")?.hasPrefix("parse frontmatter YAML: ") == true)
        #expect(error("---\nname: \"open\n---\n")?.hasPrefix("parse frontmatter YAML: ") == true)
    }

    /// The byte reader: the same fields without the body, the delimiter trimmed as Go's
    /// `strings.TrimSpace` does, and a body that is never looked at.
    @Test func frontMatterAloneFromBytes() throws {
        let text = "\u{FEFF} --- \r\nname: x\r\ndescription: d\r\n\u{A0}---\u{3000}\r\nBody <!-- c -->\r\n"
        let full = try SkillFrontMatter.parse(text)
        #expect(full == SkillFrontMatter(name: "x", description: "d", body: "Body"))
        let alone = try SkillFrontMatter.parse(utf8: Array(text.utf8), readingBody: false)
        #expect(alone == SkillFrontMatter(name: "x", description: "d", body: ""))
        // Not UTF-8 after the front matter: not read.
        let bytes = Array("---\nname: x\n---\n".utf8) + [0xFF, 0xFE] + Array(repeating: UInt8(ascii: "-"), count: 70_000)
        #expect(try SkillFrontMatter.parse(utf8: bytes, readingBody: false).name == "x")
        for notDelimiter in ["----", "- --", "-- -", "--", "---x", "x---", "—--"] {
            #expect(error("---\nname: x\n\(notDelimiter)\n") == "missing closing frontmatter delimiter", "\(notDelimiter)")
        }
        #expect(error("\n---\nname: x\n---\n") == "missing opening frontmatter delimiter")
        #expect(error("") == "missing opening frontmatter delimiter")
        #expect(try SkillFrontMatter.parse("---\nname: x\n---").body == "")
        // The plain scalar's byte scans: a comment after a blank, `: ` or a final `:` on any line.
        #expect(try SkillFrontMatter.parse("---\nname: x\ndescription: a#b  # c\n  d\t# e\n---\n").description == "a#b d")
        #expect(error("---\nname: x\ndescription: a\n  b: c\n---\n")?.hasSuffix("yaml: line 4: mapping values are not allowed in this context") == true)
        #expect(error("---\nname: x\ndescription: a\n  b:\n---\n")?.hasSuffix("yaml: line 4: mapping values are not allowed in this context") == true)
        #expect(try SkillFrontMatter.parse("---\nname: x\ndescription: a:b # c: d\n---\n").description == "a:b")
        #expect(try SkillFrontMatter.parse("---\nname: x\ndescription: |2 # c\n    two\n   one\n---\n").description == "  two\n one")
    }

    @Test func skillNamePattern() {
        for good in ["a", "a-b", "abc-123-x", "9"] { #expect(SkillFrontMatter.isValidName(good), "\(good)") }
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", "é", "a b"] { #expect(!SkillFrontMatter.isValidName(bad), "\(bad)") }
    }
}
