import AgentJSON
import MCPWire
import Testing

/// Newline framing and JSON-RPC message parsing: bounded, strict about shape.
struct JSONRPCFramingTests {
    func lines(_ chunks: [String], max: Int = 64) throws -> [String] {
        var decoder = JSONLineDecoder(maxLineBytes: max)
        var out: [String] = []
        for chunk in chunks {
            try decoder.feed(Array(chunk.utf8)) { out.append(String(decoding: $0, as: UTF8.self)) }
        }
        return out
    }

    @Test func splitsAcrossChunksDropsCRAndEmptyLines() throws {
        #expect(try lines(["{\"a\"", ":1}\n\n{\"b\":2}\r\n{", "}\n"]) == ["{\"a\":1}", "{\"b\":2}", "{}"])
    }

    @Test func lineAtTheLimitPassesOneOverFails() throws {
        let exact = String(repeating: "x", count: 64)
        #expect(try lines([exact + "\n"]) == [exact])
        #expect(try lines([exact + "\r\n"]) == [exact])
        #expect(throws: JSONLineDecoder.LineTooLong.self) { try lines([exact + "x\n"]) }
        // Without a newline the decoder fails as soon as the unfinished line passes the
        // bound (and a CR that may end it), and stays failed.
        var decoder = JSONLineDecoder(maxLineBytes: 64)
        try decoder.feed(Array(exact.utf8)) { _ in }
        try decoder.feed([UInt8(ascii: "\r")]) { _ in }
        #expect(throws: JSONLineDecoder.LineTooLong.self) { try decoder.feed([UInt8(ascii: "y")]) { _ in } }
        #expect(decoder.bufferedBytes == 0)
        #expect(throws: JSONLineDecoder.LineTooLong.self) { try decoder.feed([UInt8(ascii: "\n")]) { _ in } }
    }

    @Test func resultDoesNotDependOnTheSplitAtTheBound() throws {
        // A line of exactly the bound ended by CRLF, fed whole and byte by byte.
        let line = Array(String(repeating: "x", count: 64).utf8) + [13, 10]
        var whole = JSONLineDecoder(maxLineBytes: 64)
        var wholeLines: [[UInt8]] = []
        try whole.feed(line) { wholeLines.append($0) }
        var split = JSONLineDecoder(maxLineBytes: 64)
        var splitLines: [[UInt8]] = []
        for byte in line { try split.feed([byte]) { splitLines.append($0) } }
        #expect(wholeLines == splitLines && wholeLines.count == 1)
    }

    @Test func hugeLineNeverBuffersPastTheBound() throws {
        var decoder = JSONLineDecoder(maxLineBytes: 1 << 10)
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 300)
        var failedAt = 0
        for round in 1...100 {
            do { try decoder.feed(chunk) { _ in } } catch { failedAt = round; break }
            #expect(decoder.bufferedBytes <= 1 << 10 + 1)
        }
        #expect(failedAt == 4)
    }

    func parse(_ text: String) throws(JSONRPCMessage.ParseError) -> JSONRPCMessage {
        try JSONRPCMessage.parse(Array(text.utf8))
    }

    @Test func parsesEachKind() throws {
        #expect(try parse(#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#) == .request(id: .number(7), method: "ping", params: nil))
        #expect(
            try parse(#"{"jsonrpc":"2.0","id":"a","method":"roots/list","params":{}}"#)
                == .request(id: .string("a"), method: "roots/list", params: .object([])))
        #expect(
            try parse(#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#)
                == .notification(method: "notifications/tools/list_changed", params: nil))
        #expect(
            try parse(#"{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}"#)
                == .result(id: .number(3), .object([("tools", .array([]))])))
        #expect(
            try parse(#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#)
                == .error(id: nil, JSONRPCError(code: -32700, message: "Parse error")))
    }

    @Test func refusesWhatIsNotAMessage() {
        for bad in [
            "not json", "[1]", "3", #"{"id":1,"result":{}}"#, #"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            #"{"jsonrpc":"2.0","id":1}"#, #"{"jsonrpc":"2.0","result":{}}"#, #"{"jsonrpc":"2.0","id":1.5,"result":1}"#,
            #"{"jsonrpc":"2.0","id":1,"method":7}"#, #"{"jsonrpc":"2.0","id":1,"error":{"message":"x"}}"#,
            #"{"jsonrpc":"2.0","id":1,"result":{}} trailing"#,
        ] {
            #expect(throws: JSONRPCMessage.ParseError.self, "\(bad)") { try parse(bad) }
        }
    }

    @Test func encodesOneLineThatParsesBack() throws {
        let messages: [JSONRPCMessage] = [
            .request(id: .number(1), method: "tools/call", params: .object([("name", .string("a\"b\\c\n\u{1}é"))])),
            .notification(method: "notifications/cancelled", params: .object([("requestId", .number("1"))])),
            .result(id: .string("x"), .object([])),
            .error(id: .number(2), JSONRPCError(code: -32601, message: "Method not found")),
        ]
        for message in messages {
            let line = message.encodedLine()
            #expect(line.last == UInt8(ascii: "\n"))
            #expect(line.dropLast().firstIndex(of: UInt8(ascii: "\n")) == nil)
            #expect(try JSONRPCMessage.parse(line.dropLast()) == message)
        }
    }
}
