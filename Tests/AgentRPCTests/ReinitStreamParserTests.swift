import AgentRPC
import Testing

/// `/reinit`'s events read as the reference's SDK reads them, whatever the chunking, bounded.
struct ReinitStreamParserTests {
    static let owner = "0b1c2d3e-4f50-4617-8283-94a5b6c7d8e9"
    static let workspace = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
    static let stream = "event: ping\n\n\nevent: data\ndata: {\"workspace_id\":\"\(workspace)\",\"reason\":\"prebuild_claimed\",\"owner_id\":\"\(owner)\"}\n\n"

    @Test func pingsAndAClaim() throws {
        var parser = ReinitStreamParser()
        let items = try parser.feed(Array(Self.stream.utf8))
        #expect(items == [.ping, .event(ReinitEvent(workspaceID: Self.workspace, reason: "prebuild_claimed", ownerID: Self.owner))])
    }

    @Test func theSplitDoesNotMatter() throws {
        let bytes = Array(Self.stream.utf8)
        var whole = ReinitStreamParser()
        let expected = try whole.feed(bytes)
        for cut in 0...bytes.count {
            var parser = ReinitStreamParser()
            let items = try parser.feed(bytes[..<cut]) + parser.feed(bytes[cut...])
            #expect(items == expected, "cut at \(cut)")
        }
    }

    @Test func aMissingOwnerIsNone() throws {
        var parser = ReinitStreamParser()
        let items = try parser.feed(Array("event: data\ndata: {\"workspace_id\":\"\(Self.workspace)\",\"reason\":\"prebuild_claimed\"}\n\n".utf8))
        #expect(items == [.event(ReinitEvent(workspaceID: Self.workspace, reason: "prebuild_claimed", ownerID: nil))])
    }

    @Test(arguments: [
        ("event: error\ndata: {}\n", "unexpected server sent event type error"),
        ("event: other\n", "unknown event type: other"),
        ("data: {}\n", "expecting event event, got: data: {}"),
        ("event: data\nevent: ping\n", "expecting data event, got: event: ping"),
        ("event: data\ndata: nope\n", "unmarshal reinit response: not a JSON object"),
        ("event: data\ndata: {\"owner_id\":\"x\"}\n", "unmarshal reinit response: invalid UUID \"x\""),
    ])
    func malformedStreamsAreErrors(_ text: String, _ message: String) {
        var parser = ReinitStreamParser()
        #expect(throws: ReinitStreamParser.Failure(description: message)) { try parser.feed(Array(text.utf8)) }
        // And stay failed.
        #expect(throws: ReinitStreamParser.Failure.self) { try parser.feed(Array("event: ping\n".utf8)) }
    }

    /// An event followed by garbage in the same chunk is handed over; the failure comes next.
    @Test func anEventBeforeAFailureIsKept() throws {
        var parser = ReinitStreamParser()
        let items = try parser.feed(Array((Self.stream + "bogus\n").utf8))
        #expect(items.count == 2)
        #expect(throws: ReinitStreamParser.Failure(description: "expecting event event, got: bogus")) { try parser.feed([]) }
    }

    @Test func aLineBeyondTheBoundIsAnError() {
        var parser = ReinitStreamParser()
        let long = [UInt8](repeating: UInt8(ascii: "x"), count: ReinitStreamParser.maxLineBytes + 1)
        #expect(throws: ReinitStreamParser.Failure.self) { try parser.feed(long) }
    }
}
