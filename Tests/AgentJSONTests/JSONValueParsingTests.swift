import AgentJSON
import Testing

/// `JSONValue`'s parser against what Go's `encoding/json` does with the same bytes:
/// `parseWhole` as `json.Unmarshal`, `parseFirst` as one `Decoder.Decode`.
struct JSONValueParsingTests {
    func whole(_ text: String) throws(JSONSyntaxError) -> JSONValue { try JSONValue.parseWhole(Array(text.utf8)) }

    func wholeError(_ text: String) -> String? {
        do throws(JSONSyntaxError) {
            _ = try whole(text)
            return nil
        } catch {
            return error.description
        }
    }

    func firstError(_ text: String) -> String? {
        do throws(JSONSyntaxError) {
            _ = try JSONValue.parseFirst(Array(text.utf8))
            return nil
        } catch {
            return error.description
        }
    }

    @Test func scalarsAndNumbersKeptAsWritten() throws {
        #expect(try whole(" \t\r\ntrue\n") == .bool(true))
        #expect(try whole("false") == .bool(false))
        #expect(try whole("null") == .null)
        #expect(try whole("-0.50e+3") == .number("-0.50e+3"))
        #expect(try whole("0") == .number("0"))
        #expect(try whole("1E-2") == .number("1E-2"))
        #expect(try whole("12345678901234567890123") == .number("12345678901234567890123"))
        #expect(try whole("42").intValue == 42)
        #expect(try whole("4.2").intValue == nil)
    }

    @Test func objectsKeepOrderAndDuplicatesAndTheLastWins() throws {
        let value = try whole(#"{"b":1,"a":[true,null],"b":"x"}"#)
        #expect(value == .object([("b", .number("1")), ("a", .array([.bool(true), .null])), ("b", .string("x"))]))
        #expect(value["b"] == .string("x"), "the last of duplicates, as Go's map keeps it")
        #expect(value["a"]?.arrayValue == [.bool(true), .null])
        #expect(value["missing"] == nil)
        #expect(try whole("[]") == .array([]))
        #expect(try whole("{ }") == .object([]))
        #expect(try whole("[1]")["a"] == nil, "members only of objects")
        #expect(value.goKind == "object" && JSONValue.string("").goKind == "string" && JSONValue.null.goKind == "null")
    }

    @Test func stringEscapesAndSurrogates() throws {
        #expect(try whole(#""\"\\\/\b\f\n\r\t\u00e9\u00E9""#) == .string("\"\\/\u{08}\u{0C}\n\r\t\u{e9}\u{e9}"))
        #expect(try whole(#""\ud83d\ude00""#) == .string("😀"))
        // Go replaces an unpaired surrogate with U+FFFD and reads what follows on its own.
        #expect(try whole(#""\ud800x""#) == .string("\u{FFFD}x"))
        #expect(try whole(#""\ud800\u0041""#) == .string("\u{FFFD}A"))
        #expect(try whole(#""\udc00""#) == .string("\u{FFFD}"))
        // An invalid UTF-8 byte becomes U+FFFD.
        #expect(try JSONValue.parseWhole([0x22, 0x61, 0xFF, 0x62, 0x22]) == .string("a\u{FFFD}b"))
        #expect(try whole(#""é raw""#).stringValue == "é raw")
        // A raw control character is not allowed in a string.
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parseWhole([0x22, 0x09, 0x22]) }
    }

    @Test func unmarshalErrorsAreWordedAsGoWordsThem() {
        #expect(wholeError("") == "unexpected end of JSON input")
        #expect(wholeError(" \n ") == "unexpected end of JSON input")
        #expect(wholeError(#"{"a":1} x"#) == "invalid character 'x' after top-level value")
        #expect(wholeError("01") == "invalid character '1' after top-level value")
        #expect(wholeError("[1,]") == "invalid character ']' looking for beginning of value")
        #expect(wholeError(#"{"a":}"#) == "invalid character '}' looking for beginning of value")
        #expect(wholeError(#"{"a":1,}"#) == "invalid character '}' looking for beginning of object key string")
        #expect(wholeError("{1:2}") == "invalid character '1' looking for beginning of object key string")
        #expect(wholeError(#"{"a" 1}"#) == "invalid character '1' after object key")
        #expect(wholeError(#"{"a":1 "b":2}"#) == #"invalid character '"' after object key:value pair"#)
        #expect(wholeError("[1 2]") == "invalid character '2' after array element")
        #expect(wholeError("-x") == "invalid character 'x' in numeric literal")
        #expect(wholeError("1.x") == "invalid character 'x' after decimal point in numeric literal")
        #expect(wholeError("1ex") == "invalid character 'x' in exponent of numeric literal")
        #expect(wholeError("nulx") == "invalid character 'x' in literal null (expecting 'l')")
        #expect(wholeError("trUe") == "invalid character 'U' in literal true (expecting 'u')")
        #expect(wholeError(#""\q""#) == "invalid character 'q' in string escape code")
        #expect(wholeError(#""\u12g4""#) == #"invalid character 'g' in \u hexadecimal character escape"#)
        #expect(wholeError("'a'") == #"invalid character '\'' looking for beginning of value"#)
        #expect(wholeError(".5") == "invalid character '.' looking for beginning of value")
        #expect(wholeError("+1") == "invalid character '+' looking for beginning of value")
    }

    /// Input that ends too soon: `json.Unmarshal` ends its scan with a blank, which leaves
    /// `unexpected end of JSON input` between tokens and inside a string, and is refused in
    /// the scanner's words inside a literal, a number or an escape. A decoder says
    /// `unexpected EOF` for all of them (`io.ErrUnexpectedEOF`).
    @Test func truncatedInputIsWordedAsUnmarshalAndDecodeWordIt() {
        let end = "unexpected end of JSON input"
        for text in ["{", "[", #"{"a""#, #"{"a":"#, #"{"a":1"#, #"{"a":1,"#, "[1,", "[1", #""abc"#, #""\ud800"#, #"{"a":[{"b":"#] {
            #expect(wholeError(text) == end, "\(text)")
            #expect(firstError(text) == "unexpected EOF", "\(text)")
        }
        let cut: [(String, String)] = [
            ("t", "invalid character ' ' in literal true (expecting 'r')"),
            ("tru", "invalid character ' ' in literal true (expecting 'e')"),
            ("[fals", "invalid character ' ' in literal false (expecting 'e')"),
            (#"{"a":nul"#, "invalid character ' ' in literal null (expecting 'l')"),
            ("-", "invalid character ' ' in numeric literal"),
            ("[1.", "invalid character ' ' after decimal point in numeric literal"),
            ("1e", "invalid character ' ' in exponent of numeric literal"),
            ("1E-", "invalid character ' ' in exponent of numeric literal"),
            (#""\"#, "invalid character ' ' in string escape code"),
            (#""\u12"#, #"invalid character ' ' in \u hexadecimal character escape"#),
            (#""\ud800\u"#, #"invalid character ' ' in \u hexadecimal character escape"#),
        ]
        for (text, error) in cut {
            #expect(wholeError(text) == error, "\(text)")
            #expect(firstError(text) == "unexpected EOF", "\(text)")
        }
        #expect(JSONSyntaxError.unexpectedEndOfInput == end && JSONSyntaxError.unexpectedEOF == "unexpected EOF")
    }

    /// The offending byte is shown as Go's `quoteChar` shows it: as the rune of its value,
    /// quoted by `strconv.Quote` (a UTF-8 byte order mark reads as `'ï'`).
    @Test func theOffendingByteIsQuotedAsGoQuotesIt() {
        func error(_ bytes: [UInt8]) -> String? {
            do throws(JSONSyntaxError) {
                _ = try JSONValue.parseWhole(bytes)
                return nil
            } catch {
                return error.description
            }
        }
        let start = "looking for beginning of value"
        #expect(error([0xEF, 0xBB, 0xBF] + Array("{}".utf8)) == "invalid character 'ï' \(start)")
        #expect(error(Array("\"a\nb\"".utf8)) == #"invalid character '\n' in string literal"#)
        #expect(error([0x22, 0x01, 0x22]) == #"invalid character '\x01' in string literal"#)
        #expect(error([0x22, 0x1F, 0x22]) == #"invalid character '\x1f' in string literal"#)
        #expect(error(Array(#"{"a":1\#u{0B}}"#.utf8)) == #"invalid character '\v' after object key:value pair"#)
        #expect(error(Array("\\".utf8)) == #"invalid character '\\' \#(start)"#)
        #expect(error([0x7F]) == #"invalid character '\x7f' \#(start)"#)
        #expect(error([0x80]) == #"invalid character '\u0080' \#(start)"#)
        #expect(error([0xA0]) == #"invalid character '\u00a0' \#(start)"#)
        #expect(error([0xAD]) == #"invalid character '\u00ad' \#(start)"#)
        #expect(error([0xFF]) == "invalid character 'ÿ' \(start)")
        #expect(error(Array(" ".utf8) + [0x0C]) == #"invalid character '\f' \#(start)"#)
    }

    @Test func decodeReadsTheFirstValueOnly() throws {
        #expect(try JSONValue.parseFirst(Array(#"{"a":1} trailing"#.utf8)) == .object([("a", .number("1"))]))
        #expect(try JSONValue.parseFirst(Array("  [1][2]".utf8)) == .array([.number("1")]))
        #expect(firstError("") == "EOF")
        #expect(firstError("   ") == "EOF")
        #expect(firstError(#"{"a":"#) == "unexpected EOF")
        #expect(firstError("tru") == "unexpected EOF")
        #expect(firstError(#"["x"#) == "unexpected EOF")
    }

    /// The agent's own nesting bound (Go's is 10000): deep enough for any API body, shallow
    /// enough for the parser's stack.
    @Test func nestingIsBounded() throws {
        let deepest = String(repeating: "[", count: 256) + String(repeating: "]", count: 256)
        #expect(throws: Never.self) { try whole(deepest) }
        let tooDeep = String(repeating: "[", count: 257) + String(repeating: "]", count: 257)
        #expect(wholeError(tooDeep) == "exceeded max depth")
        let objects = String(repeating: #"{"a":"#, count: 257) + "1" + String(repeating: "}", count: 257)
        #expect(wholeError(objects) == "exceeded max depth")
    }
}
