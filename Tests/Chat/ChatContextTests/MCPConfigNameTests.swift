import AgentCore
import Testing

/// Server names that are not valid UTF-8: they decode to U+FFFD, so two of them would be
/// one name (the last silently winning); such a name is refused as an invalid entry.
struct MCPConfigNameTests {
    @Test func namesThatAreNotValidUTF8AreRefused() throws {
        var bytes = Array(#"{"mcpServers":{"a"#.utf8) + [0xFF] + Array(#"":{"command":"one"},"a"#.utf8) + [0xFE]
        bytes += Array(#"":{"command":"two"},"ok":{"command":"three"}}}"#.utf8)
        let file = try MCPConfigFile.parse(bytes, environment: { _ in nil })
        #expect(file.servers.map(\.name) == ["ok"])
        #expect(file.entryErrors.count == 1)
        let error = try #require(file.entryErrors.first)
        #expect(error.message.contains("is not valid UTF-8"), "\(error.message)")
    }

    @Test func aNameWithTheReplacementCharacterIsRefused() throws {
        let file = try MCPConfigFile.parse(Array(#"{"mcpServers":{"b\ufffd":{"command":"x"}}}"#.utf8), environment: { _ in nil })
        #expect(file.servers.isEmpty)
        #expect(file.entryErrors.first?.message.contains("U+FFFD") == true)
        #expect(MCPConfigFile.nameProblem("plain-name") == nil)
    }
}
