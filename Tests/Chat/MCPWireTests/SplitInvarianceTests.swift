import MCPWire
import Testing

/// The wire decoders give the same items however a stream is cut into chunks: whole, byte by
/// byte, and at every pair of cut points.
struct SplitInvarianceTests {
    /// Every way to cut `bytes` into three chunks (some empty), and byte by byte.
    static func splits(_ bytes: [UInt8]) -> [[[UInt8]]] {
        var all: [[[UInt8]]] = [bytes.map { [$0] }]
        for first in 0...bytes.count {
            for second in first...bytes.count {
                all.append([Array(bytes[..<first]), Array(bytes[first..<second]), Array(bytes[second...])])
            }
        }
        return all
    }

    func lines(_ chunks: [[UInt8]], max: Int) throws -> [String] {
        var decoder = JSONLineDecoder(maxLineBytes: max)
        var out: [String] = []
        for chunk in chunks { try decoder.feed(chunk) { out.append(String(decoding: $0, as: UTF8.self)) } }
        return out
    }

    func events(_ chunks: [[UInt8]], max: Int) throws -> [SSEEvent] {
        var decoder = SSEDecoder(maxEventBytes: max)
        var out: [SSEEvent] = []
        for chunk in chunks { try decoder.feed(chunk) { out.append($0) } }
        return out
    }

    @Test func jsonLinesDoNotDependOnTheSplit() throws {
        let stream = Array("{\"a\":1}\r\n\n\r\n{\"b\":\"x\\ny\"}\n1234567890abcdef\r\n[]\nunfinished".utf8)
        let expected = [#"{"a":1}"#, #"{"b":"x\ny"}"#, "1234567890abcdef", "[]"]
        for chunks in Self.splits(stream) {
            #expect(try lines(chunks, max: 16) == expected, "\(chunks.map(\.count))")
        }
    }

    @Test func aLineOverTheBoundFailsWhateverTheSplit() {
        let stream = Array("{}\n123456789\n{}\n".utf8)
        for chunks in Self.splits(stream) {
            var seen: [String] = []
            var decoder = JSONLineDecoder(maxLineBytes: 8)
            let error = #expect(throws: JSONLineDecoder.LineTooLong.self) {
                for chunk in chunks { try decoder.feed(chunk) { seen.append(String(decoding: $0, as: UTF8.self)) } }
            }
            #expect(error?.limit == 8)
            #expect(seen == ["{}"], "\(chunks.map(\.count))")
            #expect(decoder.bufferedBytes == 0)
        }
    }

    @Test func sseEventsDoNotDependOnTheSplit() throws {
        let stream = Array(
            (": hello\r\rid: 1\revent: endpoint\r\ndata: /m?s=1\r\n\r\n" + "data:a\ndata: b\nretry: 5\n\n" + "event: x\n\n"
                + "id\ndata\r\n\r" + "data:last").utf8)
        let expected = [
            SSEEvent(type: "endpoint", data: Array("/m?s=1".utf8), id: "1"),
            SSEEvent(type: "message", data: Array("a\nb".utf8), id: "1"),
            SSEEvent(type: "message", data: [], id: ""),
        ]
        #expect(try events([stream], max: 64) == expected)
        for chunks in Self.splits(stream) {
            #expect(try events(chunks, max: 64) == expected, "\(chunks.map(\.count))")
        }
    }

    @Test func anSSEEventOverTheBoundFailsWhateverTheSplit() {
        let stream = Array("data: ok\n\ndata: 0123456789\ndata: 0123456789\n\n".utf8)
        for chunks in Self.splits(stream) {
            var seen: [SSEEvent] = []
            var decoder = SSEDecoder(maxEventBytes: 16)
            let error = #expect(throws: SSEDecoder.EventTooLong.self) {
                for chunk in chunks { try decoder.feed(chunk) { seen.append($0) } }
            }
            #expect(error?.limit == 16)
            #expect(seen == [SSEEvent(type: "message", data: Array("ok".utf8))], "\(chunks.map(\.count))")
        }
    }
}
