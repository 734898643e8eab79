import AgentCore
import AgentHTTP
import AgentTestSupport
import Testing

/// Request decoding must behave like Go's encoding/json.
struct JSONRequestTests {
    @Test func readsOnlyTheFirstValue() throws {
        let r = try JSONRequest.parse(Array(#"{"command":"a"} trailing garbage {"#.utf8), typeName: "T")
        #expect(try r.string("command") == "a")
    }

    @Test func unknownKeysIgnoredAndKeysMatchCaseInsensitively() throws {
        let r = try JSONRequest.parse(Array(#"{"COMMAND":"x","other":[1,{"a":null}]}"#.utf8), typeName: "T")
        #expect(try r.string("command") == "x")
        let exact = try JSONRequest.parse(Array(#"{"Command":"upper","command":"exact"}"#.utf8), typeName: "T")
        #expect(try exact.string("command") == "exact")
    }

    @Test func duplicateKeysLastWins() throws {
        let r = try JSONRequest.parse(Array(#"{"command":"a","command":"b"}"#.utf8), typeName: "T")
        #expect(try r.string("command") == "b")
    }

    @Test func nullBodyIsEmptyObject() throws {
        let r = try JSONRequest.parse(Array("null".utf8), typeName: "T")
        #expect(try r.string("command") == nil)
    }

    @Test func goStyleErrors() {
        func detail(_ text: String) -> String? {
            do {
                let r = try JSONRequest.parse(Array(text.utf8), typeName: "StartProcessRequest")
                _ = try r.string("command")
                _ = try r.stringMap("env")
                _ = try r.bool("background")
                return nil
            } catch {
                #expect(error.statusCode == 400)
                #expect(error.body.message == "Request body must be valid JSON.")
                return error.body.detail
            }
        }
        #expect(detail("") == "EOF")
        #expect(detail("   ") == "EOF")
        #expect(detail("{") == "unexpected EOF")
        #expect(detail(#"{"command":"#) == "unexpected EOF")
        #expect(detail("{invalid json") == "invalid character 'i' looking for beginning of object key string")
        #expect(detail(#"{"command":5}"#) == "json: cannot unmarshal number into Go struct field StartProcessRequest.command of type string")
        #expect(detail(#"{"background":"yes"}"#) == "json: cannot unmarshal string into Go struct field StartProcessRequest.background of type bool")
        #expect(detail(#"{"env":[]}"#) == "json: cannot unmarshal array into Go struct field StartProcessRequest.env of type map[string]string")
        #expect(detail("[1,2]") == "json: cannot unmarshal array into Go value of type StartProcessRequest")
        #expect(detail(#""str""#) == "json: cannot unmarshal string into Go value of type StartProcessRequest")
        #expect(detail("tru") == "unexpected EOF")
        #expect(detail("trux") == "invalid character 'x' in literal true (expecting 'e')")
    }

    @Test func stringEscapesAndUnicode() throws {
        let r = try JSONRequest.parse(Array(#"{"command":"a\"b\\c\n\u00e9\ud83d\ude00"}"#.utf8), typeName: "T")
        #expect(try r.string("command") == "a\"b\\c\né😀")
        let raw = try JSONRequest.parse([0x7b, 0x22, 0x63, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d], typeName: "T")
        #expect(try raw.string("c") == "\u{FFFD}")
    }

    @Test func deepNestingIsRefusedNotCrashing() {
        let deep = String(repeating: "[", count: 100_000)
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parseFirst(Array(deep.utf8)) }
    }

    @Test func numbersAndLiterals() throws {
        let v = try JSONValue.parseFirst(Array(#"[-0.5e+3, 0, 12, true, false, null]"#.utf8))
        #expect(v == .array([.number("-0.5e+3"), .number("0"), .number("12"), .bool(true), .bool(false), .null]))
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parseFirst(Array("-".utf8)) }
        #expect(throws: JSONSyntaxError.self) { try JSONValue.parseFirst(Array("[1.]".utf8)) }
    }

    /// Random and mutated inputs: the parser must answer or throw, never trap or hang.
    @Test(.ownThreads) func fuzzedInputsNeverCrash() {
        var rng = SplitMix64(seed: 0x5eed)
        let seeds = [#"{"command":"echo hi","env":{"A":"b"},"background":true}"#, #"[1,{"a":[null,"\u0041"]}]"#]
        for i in 0..<20_000 {
            var bytes = Array(seeds[i % seeds.count].utf8)
            for _ in 0..<(1 + Int(rng.next() % 6)) {
                let position = Int(rng.next() % UInt64(bytes.count + 1))
                switch rng.next() % 3 {
                case 0 where !bytes.isEmpty && position < bytes.count: bytes[position] = UInt8(truncatingIfNeeded: rng.next())
                case 1 where position < bytes.count: bytes.remove(at: position)
                default: bytes.insert(UInt8(truncatingIfNeeded: rng.next()), at: position)
                }
            }
            _ = try? JSONRequest.parse(bytes, typeName: "T").string("command")
        }
        for _ in 0..<2_000 {
            let length = Int(rng.next() % 64)
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            _ = try? JSONValue.parseFirst(bytes)
        }
    }
}

/// Repeated keys decode as Go's `encoding/json` does.
@Suite struct JSONRequestGoDuplicateKeyTests {
    @Test func theLastMatchingKeyWins() throws {
        let r = try JSONRequest.parse(Array(#"{"command":"echo lower","Command":"echo upper"}"#.utf8), typeName: "T")
        #expect(try r.string("command") == "echo upper")
        let exactFirst = try JSONRequest.parse(Array(#"{"Command":"folded","command":"exact"}"#.utf8), typeName: "T")
        #expect(try exactFirst.string("command") == "exact")
    }

    @Test func nullLeavesAScalarAlone() throws {
        let r = try JSONRequest.parse(Array(#"{"command":"kept","command":null,"background":true,"Background":null}"#.utf8), typeName: "T")
        #expect(try r.string("command") == "kept")
        #expect(try r.bool("background") == true)
    }

    @Test func mapsMergeAndNullResets() throws {
        let merged = try JSONRequest.parse(Array(#"{"env":{"A":"1","B":"x"},"Env":{"B":"2","C":null}}"#.utf8), typeName: "T")
        #expect(try merged.stringMap("env") == ["A": "1", "B": "2", "C": ""])
        let reset = try JSONRequest.parse(Array(#"{"env":{"A":"1"},"env":null}"#.utf8), typeName: "T")
        #expect(try reset.stringMap("env") == nil)
    }

    @Test func goFoldsTheLongSAndTheKelvinSign() throws {
        let r = try JSONRequest.parse(Array("{\"\u{17F}ignal\":\"kill\",\"wor\u{212A}dir\":\"/tmp\"}".utf8), typeName: "T")
        #expect(try r.string("signal") == "kill")
        #expect(try r.string("workdir") == "/tmp")
    }

    @Test func aTypeErrorInAnyDuplicateIsReported() {
        #expect(throws: APIError.self) {
            try JSONRequest.parse(Array(#"{"command":1,"command":"ok"}"#.utf8), typeName: "T").string("command")
        }
    }
}

/// A field's error names it by its JSON path from the body, never by a Swift type.
struct JSONPathErrorTests {
    func detail(_ text: String, _ read: (JSONRequest) throws(APIError) -> Void) -> String? {
        do {
            try read(try JSONRequest.parse(Array(text.utf8), typeName: "StartProcessRequest"))
            return nil
        } catch {
            return error.body.detail
        }
    }

    @Test func nestedObjectsNameTheWholePath() {
        let rows = detail(#"{"pty":{"rows":"tall"}}"#) { body throws(APIError) in
            _ = try body.with(body.value("pty")!, at: "pty").int("rows")
        }
        #expect(rows == "json: cannot unmarshal string into Go struct field StartProcessRequest.pty.rows of type int")
        let deeper = detail(#"{"files":[{},{"edit":{"old_text":1}}]}"#) { body throws(APIError) in
            guard case .array(let files) = body.value("files")! else { return }
            let file = body.with(files[1], at: "files").with(files[1], at: "[1]")
            _ = try file.with(file.value("edit")!, at: "edit").string("old_text")
        }
        #expect(deeper == "json: cannot unmarshal number into Go struct field StartProcessRequest.files[1].edit.old_text of type string")
        // Top-level fields read as before.
        #expect(
            detail(#"{"command":5}"#) { body throws(APIError) in _ = try body.string("command") }
                == "json: cannot unmarshal number into Go struct field StartProcessRequest.command of type string")
    }

    struct Start: Decodable {
        struct Terminal: Decodable {
            var rows: UInt16
            var cols: UInt16
        }
        var command: String
        var pty: Terminal?
        var env: [String]?
        var background: Bool?
    }

    func decodable(_ text: String) -> String? {
        do {
            _ = try JSONRequest.decode(Start.self, from: Array(text.utf8))
            return nil
        } catch {
            #expect(error.statusCode == 400)
            return error.body.detail
        }
    }

    @Test func decodableTypesNameTheJSONPath() throws {
        #expect(decodable(#"{"command":"ls","pty":{"rows":"x","cols":80}}"#) == "pty.rows: expected an integer")
        #expect(decodable(#"{"command":"ls","env":["A=1","B=2",3]}"#) == "env[2]: expected a string")
        #expect(decodable(#"{"command":"ls","pty":{"rows":24}}"#) == "pty.cols: required")
        #expect(decodable(#"{"command":"ls","background":"yes"}"#) == "background: expected a boolean")
        #expect(decodable(#"{"command":"ls","pty":{"rows":24,"cols":null}}"#) == "pty.cols: expected an integer, got null")
        #expect(decodable(#"{"command":"ls","pty":[]}"#) == "pty: expected an object")
        #expect(decodable(#"{"command":"ls","pty":{"rows":70000,"cols":80}}"#) == "The body is not valid JSON, or a number in it is out of range for its field.")
        #expect(decodable("{") == "The body is not valid JSON, or a number in it is out of range for its field.")
        let start = try JSONRequest.decode(Start.self, from: Array(#"{"command":"ls","pty":{"rows":24,"cols":80}}"#.utf8))
        #expect(start.pty?.cols == 80)
    }
}
