import AgentJSON
import Testing

/// `JSONValue.indented` writes what Go's `json.MarshalIndent(v, "", indent)` writes for the
/// value Go decoded into `any`.
struct JSONIndentedTests {
    @Test func sortedKeysEmptyContainersAndHTMLEscapes() {
        let value = JSONValue.object([
            ("b", .array([])), ("a", .object([])), ("c", .string("<&>\u{2028}")), ("Z", .null), ("é", .bool(false)),
        ])
        #expect(
            value.indented() == """
                {
                  "Z": null,
                  "a": {},
                  "b": [],
                  "c": "\\u003c\\u0026\\u003e\\u2028",
                  "é": false
                }
                """)
    }

    @Test func nestingIndentAndPrefix() {
        let value = JSONValue.object([("k", .array([.number("1"), .string("x"), .object([("y", .number("2"))])]))])
        #expect(value.indented("\t") == "{\n\t\"k\": [\n\t\t1,\n\t\t\"x\",\n\t\t{\n\t\t\t\"y\": 2\n\t\t}\n\t]\n}")
        #expect(JSONValue.array([.null]).indented(" ", prefix: ">") == "[\n> null\n>]")
    }

    @Test func duplicatesKeepTheLastValueAtTheFirstPlace() {
        let value = JSONValue.object([("b", .number("1")), ("a", .number("2")), ("b", .number("3"))])
        #expect(value.indented(sortingKeys: false) == "{\n  \"b\": 3,\n  \"a\": 2\n}")
        #expect(value.indented() == "{\n  \"a\": 2,\n  \"b\": 3\n}")
    }

    @Test func scalarsAndNumbersAsParsed() throws {
        #expect(JSONValue.null.indented() == "null")
        #expect(JSONValue.bool(true).indented() == "true")
        #expect(JSONValue.string("a\"b\n").indented() == #""a\"b\n""#)
        #expect(try JSONValue.parseWhole(Array("1.50".utf8)).indented() == "1.50")
    }
}
