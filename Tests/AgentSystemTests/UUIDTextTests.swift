import AgentSystem
import FoundationEssentials
import Testing

@Suite struct UUIDTextTests {
    /// Lowercase 8-4-4-4-12 hex, version 4, RFC 4122 variant; Foundation parses it back to
    /// the same text; ten thousand are all different.
    @Test func uuidsAreVersion4TextAndDistinct() {
        var seen = Set<String>()
        for _ in 0..<10_000 {
            let text = UUIDText.random()
            #expect(text.utf8.count == 36)
            let parts = text.split(separator: "-", omittingEmptySubsequences: false).map(\.count)
            #expect(parts == [8, 4, 4, 4, 12])
            #expect(text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) || $0 == 0x2D })
            let bytes = Array(text.utf8)
            #expect(bytes[14] == UInt8(ascii: "4"))
            #expect([UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "a"), UInt8(ascii: "b")].contains(bytes[19]))
            #expect(UUID(uuidString: text)?.uuidString.lowercased() == text)
            seen.insert(text)
        }
        #expect(seen.count == 10_000)
    }
}
