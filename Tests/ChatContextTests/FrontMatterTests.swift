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

    @Test func skillNamePattern() {
        for good in ["a", "a-b", "abc-123-x", "9"] { #expect(SkillFrontMatter.isValidName(good), "\(good)") }
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", "é", "a b"] { #expect(!SkillFrontMatter.isValidName(bad), "\(bad)") }
    }
}
