import Testing
@testable import LineRegex

/// (pattern, text, expected) with text given as a Swift string (UTF-8 encoded).
let matchCases: [(String, String, Bool)] = [
    // Literals and the empty pattern
    (#""#, "", true),
    (#""#, "abc", true),
    (#"a"#, "a", true),
    (#"a"#, "b", false),
    (#"abc"#, "xabcx", true),
    (#"abc"#, "ab", false),
    (#"abc"#, "abd abc", true),
    (#"日本"#, "こんにちは日本語", true),
    (#"日本"#, "日x本", false),
    // Dot
    (#"a.c"#, "abc", true),
    (#"a.c"#, "a\nc", false),
    (#"(?s)a.c"#, "a\nc", true),
    (#"a.c"#, "a☺c", true),
    (#"^.$"#, "☺", true),
    (#"^..$"#, "☺", false),
    (#"^...$"#, "☺", false),
    (#"."#, "", false),
    (#".*"#, "", true),
    (#"^.{3}$"#, "日本語", true),
    // Character classes
    (#"[abc]"#, "xbx", true),
    (#"[abc]"#, "xyz", false),
    (#"[^abc]"#, "abc", false),
    (#"[^abc]"#, "abcd", true),
    (#"[a-z]+"#, "ABC", false),
    (#"[a-z]+"#, "ABCd", true),
    (#"[]a]"#, "]", true),
    (#"[]a]"#, "a", true),
    (#"[^]a]"#, "]", false),
    (#"[^]a]"#, "b", true),
    (#"[a-]"#, "-", true),
    (#"[-a]"#, "-", true),
    (#"[a-b-c]"#, "-", true),
    (#"[a-b-c]"#, "c", true),
    (#"[\]]"#, "]", true),
    (#"[\-]"#, "-", true),
    (#"[\x41-\x43]"#, "B", true),
    (#"[\x41-\x43]"#, "D", false),
    (#"[\d]"#, "5", true),
    (#"[\D]"#, "5", false),
    (#"[^\D]"#, "5", true),
    (#"[\w-]+$"#, "a-b", true),
    (#"[[:alpha:]]"#, "1a", true),
    (#"[[:alpha:]]"#, "123", false),
    (#"[[:^digit:]]"#, "123", false),
    (#"[[:^digit:]]"#, "12a", true),
    (#"[[:space:]]"#, "a\u{0B}b", true),
    (#"[[:upper:][:digit:]]"#, "aB", true),
    (#"[[:xdigit:]]+"#, "zzz", false),
    (#"[[:punct:]]"#, "a!", true),
    (#"[[:word:]]"#, "_", true),
    (#"[[:blank:]]"#, "a\tb", true),
    (#"[[:cntrl:]]"#, "abc", false),
    (#"[α-ω]"#, "λ", true),
    (#"[α-ω]"#, "Λ", false),
    (#"[^α-ω]"#, "λ", false),
    (#"[☺-☻]"#, "☻", true),
    (#"[^\x{0}-\x{10FFFF}]"#, "abc", false),
    // Perl classes
    (#"\d+"#, "abc123", true),
    (#"\d"#, "abc", false),
    (#"\D"#, "123", false),
    (#"\w+"#, "!!", false),
    (#"\W"#, "abc_1", false),
    (#"\S"#, "  \t", false),
    (#"\s"#, "a b", true),
    (#"\s"#, "a\u{0B}b", false),
    (#"\d"#, "٣", false),
    (#"\w"#, "é", false),
    (#"\w+"#, "日本語", false),
    // Unicode general categories
    (#"\pL"#, "é", true),
    (#"\p{L}"#, "123", false),
    (#"\p{Lu}"#, "abc", false),
    (#"\p{Lu}"#, "abC", true),
    (#"\P{L}"#, "abc", false),
    (#"\p{^L}"#, "ab1", true),
    (#"\p{Nd}"#, "٣", true),
    (#"\pN"#, "Ⅻ", true),
    (#"[\p{Lu}\d]"#, "a5", true),
    (#"[^\p{L}]"#, "abc", false),
    (#"\p{Any}"#, "x", true),
    (#"(?i)\p{Lu}"#, "abc", true),
    (#"\p{Sc}"#, "price: €5", true),
    (#"\p{Zs}"#, "a\u{00A0}b", true),
    // Unicode scripts (Go's names, Unicode 14.0)
    (#"\p{Greek}"#, "λόγος", true),
    (#"\p{Greek}"#, "logos", false),
    (#"^\p{Greek}+$"#, "αβγ", true),
    (#"\P{Greek}"#, "αβγ", false),
    (#"\p{^Greek}"#, "αβγ!", true),
    (#"\p{Han}"#, "日本語", true),
    (#"\p{Han}"#, "にほんご", false),
    (#"\p{Hiragana}"#, "にほんご", true),
    (#"\p{Cyrillic}"#, "Привет", true),
    (#"\p{Latin}"#, "Привет", false),
    (#"\p{Anatolian_Hieroglyphs}"#, "\u{14400}", true),
    (#"\p{Common}"#, "1", true),
    (#"\p{Inherited}"#, "e\u{0301}", true),
    (#"[\p{Greek}\d]"#, "abc5", true),
    (#"[^\p{Greek}a-z]"#, "abcλ", false),
    (#"[\P{Greek}]"#, "λμ", false),
    (#"(?i)\p{Greek}"#, "\u{00B5}", true),
    (#"\p{Greek}"#, "\u{00B5}", false),
    // Escapes
    (#"\t"#, "a\tb", true),
    (#"\n"#, "a\nb", true),
    (#"\x41"#, "A", true),
    (#"\x{263a}"#, "☺", true),
    (#"\x{1F600}"#, "😀", true),
    (#"\101"#, "A", true),
    (#"\0"#, "\0", true),
    (#"\012"#, "\n", true),
    (#"\.\*"#, "a", false),
    (#"\.\*"#, ".*", true),
    (#"\Qa.b\E"#, "axb", false),
    (#"\Qa.b\E"#, "a.b", true),
    (#"\Qa.b"#, "a.b", true),
    (#"\Q\E"#, "", true),
    (#"a\Q*\E+"#, "a**", true),
    (#"\a"#, "\u{07}", true),
    (#"\f\v\r"#, "\u{0C}\u{0B}\r", true),
    (##"\_\#\ \-"##, "_# -", true),
    // Anchors
    (#"^abc"#, "abc", true),
    (#"^abc"#, "xabc", false),
    (#"abc$"#, "abc", true),
    (#"abc$"#, "abc\n", false),
    (#"(?m)abc$"#, "abc\nx", true),
    (#"(?m)^x"#, "abc\nx", true),
    (#"^x"#, "abc\nx", false),
    (#"\Aabc"#, "abc", true),
    (#"abc\z"#, "xabc", true),
    (#"abc\z"#, "abcx", false),
    (#"(?m)\Ax"#, "a\nx", false),
    (#"(?m)x\z"#, "x\na", false),
    (#"^$"#, "", true),
    (#"^$"#, "a", false),
    (#"(?m)^$"#, "a\n\nb", true),
    (#"(?m)^$"#, "ab", false),
    (#"$a"#, "a", false),
    (#"a^"#, "a", false),
    (#"^*a"#, "a", true),
    (#"x|^y"#, "zy", false),
    (#"x|^y"#, "yz", true),
    // Word boundaries (ASCII word characters, as RE2)
    (#"\bfoo\b"#, "a foo b", true),
    (#"\bfoo\b"#, "afoo", false),
    (#"\Bfoo"#, "afoo", true),
    (#"\Bfoo"#, "foo", false),
    (#"\b"#, "", false),
    (#"\B"#, "", true),
    (#"\b"#, "a", true),
    (#"x\b"#, "xé", true),
    (#"\bé"#, "é", false),
    (#"\b\d+\b"#, "abc123 def", false),
    (#"\b\d+\b"#, "abc 123 def", true),
    // Groups and alternation
    (#"a|b"#, "b", true),
    (#"a|b"#, "c", false),
    (#"(a|b)c"#, "bc", true),
    (#"^(?:ab)+$"#, "ababab", true),
    (#"^(?:ab)+$"#, "ababa", false),
    (#"a|"#, "xyz", true),
    (#"|a"#, "", true),
    (#"(|a)b"#, "b", true),
    (#"()"#, "", true),
    (#"(a|)+b"#, "b", true),
    (#"((((((a))))))"#, "a", true),
    (#"(?P<name>ab)c"#, "abc", true),
    (#"(?<name>x)y"#, "xy", true),
    (#"a(b(c|d)|e)f"#, "abdf", true),
    (#"a(b(c|d)|e)f"#, "aef", true),
    (#"a(b(c|d)|e)f"#, "abf", false),
    (#"^(a|ab)(c|bcd)(d*)$"#, "abcd", true),
    (#"a*(|(b))c*"#, "abc", true),
    (#"(a)|b"#, "b", true),
    (#"^(foo|foobar)$"#, "foobar", true),
    (#"^(?:a|b|c|d)+$"#, "abcdx", false),
    // Quantifiers and counted repetition
    (#"ab*c"#, "ac", true),
    (#"ab+c"#, "ac", false),
    (#"ab?c"#, "abbc", false),
    (#"a{2}"#, "aa", true),
    (#"a{2}"#, "a", false),
    (#"^a{2}$"#, "aaa", false),
    (#"^a{2,}$"#, "aaaaa", true),
    (#"^a{2,}$"#, "a", false),
    (#"^a{2,3}$"#, "aaaa", false),
    (#"^a{2,3}$"#, "aaa", true),
    (#"^a{0}$"#, "", true),
    (#"^a{0}b$"#, "b", true),
    (#"^a{0,0}b$"#, "ab", false),
    (#"a{,3}"#, "a{,3}", true),
    (#"a{"#, "a{", true),
    (#"a{1"#, "a{1", true),
    (#"a{01}"#, "a{01}", true),
    (#"^x{1,2}y"#, "xxxy", false),
    (#"^(ab){2,3}$"#, "ababab", true),
    (#"^(ab){2,3}$"#, "abababab", false),
    (#"a*?b"#, "aab", true),
    (#"a+?"#, "a", true),
    (#"a??b"#, "b", true),
    (#"^a{2}?$"#, "aa", true),
    (#"^a{2,}?$"#, "aaa", true),
    (#"(a*)*b"#, "aaab", true),
    (#"(a*)+$"#, "b", true),
    (#"(a|b)*c"#, "ababx", false),
    (#"x*"#, "", true),
    (#"(?U)a+"#, "a", true),
    (#"^(?:a+|b+)*c$"#, "aabbac", true),
    (#"^[0-9]{3}-[0-9]{4}$"#, "555-1234", true),
    (#"^[0-9]{3}-[0-9]{4}$"#, "555-12345", false),
    // Case folding
    (#"(?i)abc"#, "ABC", true),
    (#"(?i)abc"#, "aBd", false),
    (#"(?i)k"#, "\u{212A}", true),
    (#"(?i)\x{212A}"#, "k", true),
    (#"(?i)K"#, "k", true),
    (#"(?i)s"#, "ſ", true),
    (#"(?i)σ"#, "Σ", true),
    (#"(?i)σ"#, "ς", true),
    (#"(?i)ΣΑΣ"#, "σας", true),
    (#"(?i)ǅ"#, "ǆ", true),
    (#"(?i)ǅ"#, "Ǆ", true),
    (#"(?i)[a-c]"#, "B", true),
    (#"(?i)[^a-c]"#, "B", false),
    (#"(?i)[k]"#, "\u{212A}", true),
    (#"(?i)é"#, "É", true),
    (#"(?i)ß"#, "ẞ", true),
    (#"(?i)ß"#, "ss", false),
    (#"(?i)ω"#, "\u{2126}", true),
    (#"(?i)\W"#, "k", false),
    (#"(?i)\W"#, "\u{212A}", false),
    (#"(?i)[[:upper:]]"#, "q", true),
    (#"a(?i)b"#, "aB", true),
    (#"a(?i)b"#, "AB", false),
    (#"(?i:a)b"#, "Ab", true),
    (#"(?i:a)b"#, "AB", false),
    (#"(?i)a(?-i)b"#, "Ab", true),
    (#"(?i)a(?-i)b"#, "AB", false),
    (#"(a(?i)b)c"#, "aBc", true),
    (#"(a(?i)b)c"#, "aBC", false),
    (#"(?i)\Qa.B\E"#, "A.b", true),
    (#"(?i)déjà vu"#, "DÉJÀ VU", true),
    (#"(?i)straße"#, "STRASSE", false),
    (#"(?i)i"#, "ı", false),
    (#"(?i)ı"#, "I", false),
    (#"(?i)ı"#, "ı", true),
    (#"(?i)µ"#, "μ", true),
    (#"(?i)[a-z]+"#, "ſ", true),
    // Flags
    (#"(?s)."#, "\n", true),
    (#"."#, "\n", false),
    (#"(?s:.)x"#, "\nx", true),
    (#"(?m)^b$"#, "a\nb\nc", true),
    (#"(?m-s)^.+$"#, "\n\n", false),
    (#"(?ms)^.+$"#, "\n\n", true),
    (#"(?im)^B$"#, "a\nb", true),
    (#"(?m)(?-m)^b$"#, "a\nb", false),
]

/// Cases whose text is raw bytes (invalid UTF-8 reads as U+FFFD, one byte each, as Go).
let byteCases: [(String, [UInt8], Bool)] = [
    (#"\x{FFFD}"#, [0xFF], true),
    (#"."#, [0xFF], true),
    (#"^.$"#, [0xC3], true),
    (#"^.$"#, [0xC3, 0xA9], true),
    (#"^..$"#, [0xC3, 0xA9], false),
    (#"^..$"#, [0xE2, 0x82], true),
    (#"^.$"#, [0xED, 0xA0, 0x80], false),
    (#"^...$"#, [0xED, 0xA0, 0x80], true),
    (#"a.b"#, [0x61, 0x80, 0x62], true),
    (#"^\x{FFFD}+$"#, [0xF5, 0xFF, 0xC0, 0x80], true),
    (#"é"#, [0xC3, 0xA9], true),
    (#"é"#, [0xC3], false),
    (#"^[^a]$"#, [0xFE], true),
    (#"€"#, [0xF0, 0xE2, 0x82, 0xAC], true),
    (#"^.$"#, [0xF0, 0x9F, 0x98, 0x80], true),
    (#"^.$"#, [0xC0, 0x80], false),
    (#"^..$"#, [0xC0, 0x80], true),
    (#"^.$"#, [0xF4, 0x90, 0x80, 0x80], false),
    (#"\x00"#, [0x00], true),
    (#"a\x00b"#, [0x61, 0x00, 0x62], true),
    (#"(?i)é"#, [0xC3, 0x89], true),
    (#"\w\b"#, [0x61, 0xFF], true),
    (#"\xFF"#, [0xFF], false),
    (#"\xFF"#, [0xC3, 0xBF], true),
    (#"^[\x{80}-\x{10FFFF}]+$"#, [0xE6, 0x97, 0xA5, 0xFF], true),
]

/// (pattern, exact error description).
let errorCases: [(String, String)] = [
    ("(ab", #"missing closing ): "(ab""#),
    ("a(b(c)", #"missing closing ): "a(b(c)""#),
    ("ab)", #"unexpected ): "ab)""#),
    ("[ab", #"missing closing ]: "[ab""#),
    ("[a-", #"missing closing ]: "[a-""#),
    ("[]", #"missing closing ]: "[]""#),
    ("x[^]", #"missing closing ]: "[^]""#),
    ("[[:alpha:]", #"missing closing ]: "[[:alpha:]""#),
    ("[z-a]", #"invalid character class range: "z-a""#),
    ("[[:foo:]]", #"invalid character class range: "[:foo:]""#),
    ("a**", #"invalid nested repetition operator: "**""#),
    ("a*+", #"invalid nested repetition operator: "*+""#),
    ("a*??", #"invalid nested repetition operator: "*??""#),
    ("a{2}{3}", #"invalid nested repetition operator: "{2}{3}""#),
    ("*a", #"missing argument to repetition operator: "*""#),
    ("(*)", #"missing argument to repetition operator: "*""#),
    ("a|*", #"missing argument to repetition operator: "*""#),
    ("(?i)+", #"missing argument to repetition operator: "+""#),
    ("{2}", #"missing argument to repetition operator: "{2}""#),
    ("a{1001}", #"invalid repeat count: "{1001}""#),
    ("a{2,1}", #"invalid repeat count: "{2,1}""#),
    ("a{1,1001}", #"invalid repeat count: "{1,1001}""#),
    ("a{100000000000}", #"invalid repeat count: "{100000000000}""#),
    (#"(a)\1"#, #"backreferences are not supported (RE2 syntax): "\1""#),
    (#"\9"#, #"backreferences are not supported (RE2 syntax): "\9""#),
    ("(?P<n>a)(?P=n)", #"backreferences are not supported (RE2 syntax): "(?P=""#),
    ("(?=a)", #"lookaround is not supported (RE2 syntax): "(?=""#),
    ("a(?!b)", #"lookaround is not supported (RE2 syntax): "(?!""#),
    ("(?<=a)b", #"lookaround is not supported (RE2 syntax): "(?<=""#),
    ("(?<!a)b", #"lookaround is not supported (RE2 syntax): "(?<!""#),
    (#"\x{110000}"#, #"invalid escape sequence: "\x{110000}""#),
    (#"\xZZ"#, #"invalid escape sequence: "\xZZ""#),
    (#"\x{}"#, #"invalid escape sequence: "\x{}""#),
    (#"\Z"#, #"invalid escape sequence: "\Z""#),
    (#"\C"#, #"invalid escape sequence: "\C""#),
    (#"\é"#, #"invalid escape sequence: "\é""#),
    (#"[\b]"#, #"invalid escape sequence: "\b""#),
    (#"ab\"#, #"trailing backslash at end of expression: "\""#),
    ("(?z)", #"invalid or unsupported Perl syntax: "(?z""#),
    ("(?i-)", #"invalid or unsupported Perl syntax: "(?i-)""#),
    ("(?#comment)", #"invalid or unsupported Perl syntax: "(?#""#),
    ("(?P<>a)", #"invalid named capture: "(?P<>""#),
    ("(?P<a-b>x)", #"invalid named capture: "(?P<a-b>""#),
    ("(?P<a>x)(?P<a>y)", #"duplicate capture group name: "(?P<a>""#),
    (#"\p{Klingon}"#, #"invalid character class range: "\p{Klingon}""#),
    (#"\p{greek}"#, #"invalid character class range: "\p{greek}""#),
    (#"\p{Grek}"#, #"invalid character class range: "\p{Grek}""#),
    (#"\p{Unknown}"#, #"invalid character class range: "\p{Unknown}""#),
    ("(a{1000}){1000}", "pattern too large"),
    ("((a{100}){100}){100}", "pattern too large"),
    (String(repeating: "a", count: 4097), "pattern too long (maximum is 4096 bytes)"),
    (String(repeating: "(", count: 1001) + String(repeating: ")", count: 1001), "expression nests too deeply"),
    (String(repeating: "(", count: 1000) + "a" + String(repeating: ")*", count: 1000), "expression nests too deeply"),
]

@Suite struct MatchTableTests {
    @Test func tableIsLargeEnough() {
        #expect(matchCases.count + byteCases.count + errorCases.count >= 150)
    }

    @Test(arguments: matchCases.indices)
    func stringCase(_ index: Int) throws {
        let (pattern, text, expected) = matchCases[index]
        let regex = try LineRegex(pattern)
        #expect(regex.matches(Array(text.utf8)) == expected, "pattern \(pattern) text \(text.debugDescription)")
    }

    @Test(arguments: byteCases.indices)
    func byteCase(_ index: Int) throws {
        let (pattern, bytes, expected) = byteCases[index]
        let regex = try LineRegex(pattern)
        #expect(regex.matches(bytes) == expected, "pattern \(pattern) bytes \(bytes)")
        let viaPointer = bytes.withUnsafeBytes { regex.matches($0) }
        #expect(viaPointer == expected)
    }

    @Test(arguments: errorCases.indices)
    func errorCase(_ index: Int) {
        let (pattern, message) = errorCases[index]
        #expect(throws: LineRegexError.self, "pattern \(pattern.prefix(40))") {
            _ = try LineRegex(pattern)
        }
        do {
            _ = try LineRegex(pattern)
        } catch {
            #expect(error.description == message, "pattern \(pattern.prefix(40))")
        }
    }

    @Test func errorOffsets() {
        do {
            _ = try LineRegex("ab(?=c)")
            Issue.record("expected error")
        } catch {
            #expect(error.offset == 2)
        }
        do {
            _ = try LineRegex("(ab")
            Issue.record("expected error")
        } catch {
            #expect(error.offset == 0)
        }
    }

    @Test func deepButAllowedNesting() throws {
        let pattern = String(repeating: "(", count: 1000) + "a" + String(repeating: ")", count: 1000)
        let regex = try LineRegex(pattern)
        #expect(regex.matches(Array("xay".utf8)))
        // Height exactly 1000: one literal under 999 stars (1000 stars is rejected, see errorCases).
        let stars = String(repeating: "(", count: 1000) + "a" + String(repeating: ")*", count: 999) + ")"
        #expect(try LineRegex(stars).matches(Array("b".utf8)))
    }

    @Test func programSizeAndLimits() throws {
        #expect(try LineRegex("a").programSize == 3)
        let big = try LineRegex("a{1000}")
        #expect(big.programSize <= LineRegex.maxProgramSize)
        #expect(big.matches(Array(String(repeating: "a", count: 1000).utf8)))
        #expect(!big.matches(Array(String(repeating: "a", count: 999).utf8)))
        let maxLength = try LineRegex(String(repeating: "b", count: LineRegex.maxPatternBytes))
        #expect(maxLength.matches(Array(String(repeating: "b", count: 4096).utf8)))
        #expect(!maxLength.matches(Array(String(repeating: "b", count: 4095).utf8)))
    }

    @Test func sendableAcrossTasks() async throws {
        let regex = try LineRegex(#"error: \d+"#)
        let results = await withTaskGroup(of: Bool.self) { group in
            for i in 0..<8 {
                group.addTask { regex.matches(Array("line \(i) error: \(i)".utf8)) }
            }
            var all: [Bool] = []
            for await r in group { all.append(r) }
            return all
        }
        #expect(results == Array(repeating: true, count: 8))
    }
}
