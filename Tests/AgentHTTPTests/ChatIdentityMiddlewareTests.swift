import AgentHTTP
import AgentTestSupport
import Testing

/// The chat headers are parsed once, by one middleware, into the context.
@Suite struct ChatIdentityMiddlewareTests {
    @Test func absentValidMalformedAndAncestors() async throws {
        try await withGuardServer { port, _ in
            let client = RawHTTPClient(port: port)
            let none = try #require(jsonObject(try await client.request("GET", "/chat").body))
            #expect(none["chat"] as? String == "")

            // Go's uuid.Parse forms, canonicalised.
            let braces = try await client.request("GET", "/chat", headers: [("Coder-Chat-Id", "{9B2D6C1E-2F4A-4B8E-9C3D-0A1B2C3D4E5F}")])
            #expect(try #require(jsonObject(braces.body))["chat"] as? String == "9b2d6c1e-2f4a-4b8e-9c3d-0a1b2c3d4e5f")

            let malformed = try await client.request("GET", "/chat", headers: [("Coder-Chat-Id", "not-a-uuid")])
            #expect(malformed.status == 400)
            #expect(try #require(jsonObject(malformed.body))["message"] as? String == "Invalid Coder-Chat-Id header.")

            // Ancestors: a JSON array; entries that are not UUIDs are skipped, as the reference does.
            let ancestors = try await client.request(
                "GET", "/chat",
                headers: [
                    ("Coder-Chat-Id", "9b2d6c1e-2f4a-4b8e-9c3d-0a1b2c3d4e5f"),
                    ("Coder-Ancestor-Chat-Ids", #"["1F2E3D4C-5B6A-4789-8A9B-0C1D2E3F4A5B", "nope", 7]"#),
                ])
            #expect(try #require(jsonObject(ancestors.body))["ancestors"] as? String == "1f2e3d4c-5b6a-4789-8a9b-0c1d2e3f4a5b")
        }
    }
}
