import AgentCore
import Testing

/// `.mcp.json` parsing: one bad entry costs only itself.
struct MCPConfigTests {
    let environment: (String) -> String? = { ["TOKEN": "s3cret", "HOST": "h"][$0] }

    func parse(_ text: String) throws(MCPConfigFileError) -> MCPConfigFile {
        try MCPConfigFile.parse(Array(text.utf8), environment: environment)
    }

    @Test func serversSortedWithTransportsAndExpandedEnv() throws {
        let file = try parse(
            """
            {"mcpServers": {
              "zeta": {"url": "https://x/mcp", "headers": {"Authorization": "Bearer $TOKEN"}},
              "alpha": {"command": "srv", "args": ["--port", "$TOKEN"], "env": {"A": "${TOKEN}-$HOST-$UNSET.", "B": null}},
              "sse-one": {"type": "sse", "url": "http://y"}
            }, "other": 1}
            """)
        #expect(file.entryErrors.isEmpty)
        #expect(file.servers.map(\.name) == ["alpha", "sse-one", "zeta"])
        #expect(
            file.servers[0]
                == MCPServerConfig(
                    name: "alpha", transport: "stdio", command: "srv", args: ["--port", "$TOKEN"], env: ["A": "s3cret-h-.", "B": ""]))
        #expect(file.servers[1].transport == "sse")
        #expect(file.servers[2].transport == "http")
        #expect(file.servers[2].headers == ["Authorization": "Bearer $TOKEN"], "headers are literal")
    }

    @Test func badEntriesFailAlone() throws {
        let file = try parse(
            """
            {"mcpServers": {"good": {"command": "a"}, "a__b": {"command": "a"}, "_x": {"command": "a"},
              "list": [1], "empty": {}, "typed": {"command": 5, "args": "no"}, "nulled": null, "good": {"command": "b"}}}
            """)
        #expect(file.servers.map(\.name) == ["good"])
        #expect(file.servers.first?.command == "b", "the last duplicate wins, as in Go")
        let errors = Dictionary(uniqueKeysWithValues: file.entryErrors.map { ($0.name, $0.message) })
        #expect(errors["a__b"] == "server name \"a__b\" contains reserved separator \"__\" or leading/trailing underscore")
        #expect(errors["_x"] == "server name \"_x\" contains reserved separator \"__\" or leading/trailing underscore")
        #expect(errors["list"] == "server \"list\" must be a JSON object")
        #expect(errors["empty"] == "server \"empty\" has no command or url")
        #expect(errors["nulled"] == "server \"nulled\" has no command or url")
        #expect(errors["typed"] == "parse server \"typed\": \"command\" must be a string, not a number")
        #expect(file.entryErrors.map(\.name) == ["_x", "a__b", "empty", "list", "nulled", "typed"])
    }

    @Test func wholeFileErrors() {
        func reason(_ text: String) -> String? {
            do {
                _ = try parse(text)
                return nil
            } catch {
                return error.reason
            }
        }
        #expect(reason("{") == "unexpected end of JSON input", "json.Unmarshal's words, not a decoder's")
        #expect(reason("") == "unexpected end of JSON input")
        #expect(reason("{} x") == "invalid character 'x' after top-level value")
        #expect(reason("[]") == "json: cannot unmarshal array into Go value of type agentmcp.mcpConfigFile")
        #expect(reason(#"{"mcpServers": 5}"#) == "json: cannot unmarshal number into Go struct field mcpConfigFile.mcpServers of type map[string]json.RawMessage")
        #expect(reason(#"{"MCPSERVERS": {}}"#) == nil, "keys match case-insensitively")
        #expect(reason("null") == nil)
        #expect(reason(#"{"mcpServers": null}"#) == nil)
    }

    @Test func firstFileWinsAName() throws {
        let first = try parse(#"{"mcpServers": {"a": {"command": "one"}, "c": {"command": "one"}}}"#)
        let second = try parse(#"{"mcpServers": {"a": {"command": "two"}, "b": {"command": "two"}}}"#)
        let merged = MCPConfigFile.merge([(path: "/1/.mcp.json", file: first), (path: "/2/.mcp.json", file: second)])
        #expect(merged.servers.map { "\($0.name)=\($0.command)" } == ["a=one", "b=two", "c=one"])
        #expect(merged.shadowed.map { "\($0.name)@\($0.path)" } == ["a@/2/.mcp.json"])
    }

    /// Go's `os.Expand`, edge cases included.
    @Test func goExpansion() {
        let lookup: (String) -> String? = { ["A": "x", "1": "one", "AB": "y"][$0] }
        #expect(goExpand("$A-${A}-$AB-${AB}c", lookup) == "x-x-y-yc")
        #expect(goExpand("$", lookup) == "$")
        #expect(goExpand("a$", lookup) == "a$")
        #expect(goExpand("$$", lookup) == "")
        #expect(goExpand("${}x", lookup) == "x")
        #expect(goExpand("${A", lookup) == "A")
        #expect(goExpand("$1$-x", lookup) == "onex")
        #expect(goExpand("$.", lookup) == "$.")
        #expect(goExpand("${UNSET}|$UNSET|", lookup) == "||")
        #expect(goExpand("é$A€", lookup) == "éx€")
    }
}
