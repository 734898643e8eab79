import AgentJSON
import Testing

/// Where a stream's first JSON value ends, found piece by piece: the same end however the
/// bytes are split, each byte examined once.
struct JSONValueBoundaryTests {
    @Test(arguments: [
        (#"{"a":"}\"{","b":[1,{}]} {"next":1}"#, 23),
        (#"  [1, "]", [2]]x"#, 15),
        (#""a\"b" 1"#, 6),
        ("12345,", 5),
        ("true}", 4),
        ("  x", 3),
    ])
    func theEndIsTheSameHoweverTheStreamIsSplit(text: String, end: Int) {
        let bytes = Array(text.utf8)
        #expect(JSONValue.endOfFirstValue(in: bytes) == end)
        for piece in 1...4 {
            var boundary = JSONValueBoundary()
            var found: Int?
            var offset = 0
            while found == nil, offset < bytes.count {
                found = boundary.scan(bytes[offset..<min(offset + piece, bytes.count)])
                offset += piece
            }
            #expect(found == end, "pieces of \(piece)")
            #expect(boundary.consumed == end, "each byte up to the end examined once")
        }
    }

    @Test func anUnfinishedValueWaitsForMore() {
        var boundary = JSONValueBoundary()
        #expect(boundary.scan(Array(#"{"a":[1,2"#.utf8)) == nil)
        #expect(boundary.started && boundary.consumed == 9)
        #expect(boundary.scan(Array("]}".utf8)) == 11)
        var scalar = JSONValueBoundary()
        #expect(scalar.scan(Array("123".utf8)) == nil, "a number may go on")
        #expect(scalar.scan(Array(" ".utf8)) == 3)
    }
}
