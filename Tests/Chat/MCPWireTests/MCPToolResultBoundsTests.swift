import AgentJSON
import MCPWire
import Testing

/// A `tools/call` result is mapped within bounds: at most ``MCPLimits/maxResultItems`` items
/// and ``MCPLimits/maxResultBytes`` of mapped content, so that a message of tiny items (each
/// `0,` mapped to a 56-byte text item) cannot grow twenty-fold in memory and in the answer.
struct MCPToolResultBoundsTests {
    static func result(_ items: [JSONValue]) -> JSONValue { .object([("content", .array(items))]) }

    static func refusal(_ result: JSONValue) -> String? {
        do throws(MCPError) {
            _ = try MCPToolResult(mapping: result)
            return nil
        } catch {
            return error.kind == .invalidResponse ? error.message : "kind \(error.kind)"
        }
    }

    @Test func moreItemsThanTheBoundAreRefusedBeforeAnyIsMapped() throws {
        let zeros = Array(repeating: JSONValue.number("0"), count: MCPLimits.maxResultItems)
        let atTheBound = try MCPToolResult(mapping: Self.result(zeros))
        #expect(atTheBound.content.count == MCPLimits.maxResultItems)
        #expect(atTheBound.content.first == MCPContentItem(type: "text", text: #"[unsupported content type: ""]"#))
        #expect(
            Self.refusal(Self.result(zeros + [.number("0")]))
                == "tools/call result has \(MCPLimits.maxResultItems + 1) content items, more than the \(MCPLimits.maxResultItems) passed on")
    }

    @Test func contentMappedPastTheByteBoundIsRefused() throws {
        // Two texts of 9 MiB: each fits, both do not.
        let text = JSONValue.object([("type", .string("text")), ("text", .string(String(repeating: "t", count: 9 << 20)))])
        #expect(try MCPToolResult(mapping: Self.result([text])).content.count == 1)
        #expect(Self.refusal(Self.result([text, text])) == "tools/call result's content maps to more than the \(MCPLimits.maxResultBytes) bytes passed on")
        // An image as large as a message can carry is passed on.
        let data = String(repeating: "A", count: MCPLimits.maxMessageBytes - 128)
        let image = JSONValue.object([("type", .string("image")), ("data", .string(data)), ("mimeType", .string("image/png"))])
        #expect(try MCPToolResult(mapping: Self.result([image])).content.first?.data?.utf8.count == data.utf8.count)
    }

    @Test func anItemsMappedBytesAreItsStringsAndItsFraming() {
        #expect(MCPContentItem(type: "text", text: "hi").mappedBytes == 6 + MCPContentItem.framingBytes)
        #expect(MCPContentItem(type: "image", data: "AAAA", mediaType: "image/png").mappedBytes == 18 + MCPContentItem.framingBytes)
        // The framing covers the longest item's JSON and its comma.
        #expect(#"{"data":"","media_type":"","text":"","type":""},"#.utf8.count == MCPContentItem.framingBytes)
    }
}
