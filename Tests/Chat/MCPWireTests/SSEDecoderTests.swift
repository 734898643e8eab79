import MCPWire
import Testing

/// The event-stream reader: line endings, fields, comments, and its bound.
struct SSEDecoderTests {
    func events(_ chunks: [String], limit: Int = 1 << 20) throws -> [SSEEvent] {
        var decoder = SSEDecoder(maxEventBytes: limit)
        var out: [SSEEvent] = []
        for chunk in chunks { try decoder.feed(Array(chunk.utf8)) { out.append($0) } }
        return out
    }

    @Test func readsEventsWhereverTheStreamIsSplit() throws {
        let stream = ": comment\r\nevent: endpoint\rdata: /messages?x=1\n\nid: 7\ndata: {\"a\":\ndata:1}\r\n\r\ndata\n\nevent: empty\n\ndata: unfinished"
        let expected = [
            SSEEvent(type: "endpoint", data: Array("/messages?x=1".utf8)),
            SSEEvent(type: "message", data: Array("{\"a\":\n1}".utf8), id: "7"),
            SSEEvent(type: "message", data: [], id: "7"),
        ]
        #expect(try events([stream]) == expected)
        let bytes = Array(stream.utf8)
        for split in 1..<bytes.count {
            let chunks = [String(decoding: bytes[..<split], as: UTF8.self), String(decoding: bytes[split...], as: UTF8.self)]
            #expect(try events(chunks) == expected, "split at \(split)")
        }
    }

    @Test func anEventOverTheBoundFailsWithoutHoldingIt() throws {
        var decoder = SSEDecoder(maxEventBytes: 100)
        #expect(throws: SSEDecoder.EventTooLong.self) {
            for _ in 0..<100 { try decoder.feed(Array("data: 0123456789\n".utf8)) { _ in } }
        }
        #expect(decoder.bufferedBytes == 0)
        #expect(throws: SSEDecoder.EventTooLong.self) { try decoder.feed(Array("\n".utf8)) { _ in } }
        var endless = SSEDecoder(maxEventBytes: 100)
        #expect(throws: SSEDecoder.EventTooLong.self) {
            for _ in 0..<100 { try endless.feed(Array("xxxxxxxxxx".utf8)) { _ in } }
        }
    }
}
