import MCPWire
import Testing

/// Errors for people: a line that is not JSON is quoted back (its start, bounded), not
/// described by where a JSON decoder stopped.
struct MCPErrorTextTests {
    func parseError(_ line: String) -> String {
        do throws(JSONRPCMessage.ParseError) {
            _ = try JSONRPCMessage.parse(Array(line.utf8))
            return ""
        } catch {
            return error.description
        }
    }

    @Test func aLineThatIsNotJSONIsQuotedBack() {
        #expect(parseError("oops, not json") == #"not JSON: "oops, not json""#)
        #expect(parseError("null-ish") == #"not JSON: "null-ish""#)
        #expect(!parseError("nope").contains("invalid character"))
        // Bounded: the first 200 bytes, and the length.
        let long = String(repeating: "x", count: 5000)
        #expect(parseError(long) == "not JSON: \"\(String(repeating: "x", count: 200))\"… (5000 bytes)")
        // A JSON value that is not a message keeps its own words.
        #expect(parseError("[1]") == "JSON-RPC batches are not supported")
    }
}
