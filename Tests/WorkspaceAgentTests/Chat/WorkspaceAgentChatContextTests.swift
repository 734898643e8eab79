import AgentTestSupport
import Foundation
import Testing

/// The chat context routes through the real binary, standalone (the gate opens at start):
/// the sources API, resync, the legacy context-config, bad paths, and the variables not
/// reaching children.
@Suite(.timeLimit(.minutes(2)))
struct WorkspaceAgentChatContextTests {
    /// A home with a project (the working directory) holding an `AGENTS.md`.
    static func home() throws -> (home: String, workdir: String) {
        let base = NSTemporaryDirectory() + "ctx-home-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: base + "/project", withIntermediateDirectories: true)
        let home = URL(fileURLWithPath: base).resolvingSymlinksInPath().path
        try TestFile.write(home + "/project/AGENTS.md", "# Project rules\nbe kind\n", atomically: true)
        return (home, home + "/project")
    }

    static func resources(_ response: RawHTTPClient.Response) -> [[String: Any]] {
        jsonObject(response.body)?["resources"] as? [[String: Any]] ?? []
    }

    @Test func sourcesResyncAndBadPaths() async throws {
        let (home, workdir) = try Self.home()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let agent = try AgentDaemon.launch(
            ["--http-address", "127.0.0.1:0", "--directory", workdir],
            environment: ["HOME": home, "CODER_AGENT_EXP_SKILLS_DIRS": "skills-x"])
        defer { agent.cleanup() }
        let client = RawHTTPClient(port: try await agent.port())

        // Seeded from the lists (defaults, and the variable's relative entry joined to the directory).
        let listed = try await client.request("GET", "/api/v0/context/sources")
        #expect(listed.status == 200)
        let paths = (try JSONSerialization.jsonObject(with: Data(listed.body)) as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }
        #expect(paths == [home + "/.coder", workdir + "/skills-x", workdir + "/.mcp.json"], "\(listed)")

        let first = try await client.request("POST", "/api/v0/context/resync", json: "")
        #expect(first.status == 200, "\(first)")
        let version1 = try #require(jsonInt(jsonObject(first.body)?["version"]))
        #expect(version1 >= 1)
        let instruction = Self.resources(first).first { $0["id"] as? String == "instruction_file:\(workdir)/AGENTS.md" }
        #expect(instruction?["status"] as? String == "ok" && instruction?["description"] as? String == "Project rules", "\(first)")
        #expect((jsonObject(first.body)?["aggregate_hash"] as? String)?.count == 64)

        // A source of the user's: 201 (again 201 when it exists), its resources carry source_path.
        try FileManager.default.createDirectory(atPath: home + "/extra", withIntermediateDirectories: true)
        try TestFile.write(home + "/extra/CLAUDE.md", "extra rules\n", atomically: true)
        for _ in 0..<2 {
            let added = try await client.request("POST", "/api/v0/context/sources", json: #"{"path":"~/extra/"}"#)
            #expect(added.status == 201 && jsonObject(added.body)?["path"] as? String == home + "/extra", "\(added)")
        }
        let second = try await client.request("POST", "/api/v0/context/resync", json: "")
        let version2 = try #require(jsonInt(jsonObject(second.body)?["version"]))
        #expect(version2 > version1)
        let extra = Self.resources(second).first { $0["id"] as? String == "instruction_file:\(home)/extra/CLAUDE.md" }
        #expect(extra?["source_path"] as? String == home + "/extra", "\(second)")
        let shown = try await client.request("GET", "/api/v0/context/sources/" + (home + "/extra").replacingOccurrences(of: "/", with: "%2F"))
        #expect(shown.status == 200 && jsonObject(shown.body)?["path"] as? String == home + "/extra", "\(shown)")

        // An edit is a new hash in a newer version.
        let hashBefore = instruction?["content_hash"] as? String
        try TestFile.write(workdir + "/AGENTS.md", "# Project rules\nbe kinder\n", atomically: true)
        let third = try await client.request("POST", "/api/v0/context/resync", json: "")
        let edited = Self.resources(third).first { $0["id"] as? String == "instruction_file:\(workdir)/AGENTS.md" }
        #expect(edited?["content_hash"] as? String != hashBefore && jsonInt(jsonObject(third.body)?["version"])! > version2)

        // Removal: 204 without a body, then 404 for both reads.
        let encoded = (home + "/extra").replacingOccurrences(of: "/", with: "%2F")
        let removed = try await client.request("DELETE", "/api/v0/context/sources/" + encoded)
        #expect(removed.status == 204 && removed.body.isEmpty, "\(removed)")
        let gone = try await client.request("GET", "/api/v0/context/sources/" + encoded)
        #expect(gone.status == 404 && jsonObject(gone.body)?["message"] as? String == "Context source not found.")
        #expect(jsonObject(gone.body)?["detail"] as? String == "No source registered for path \"\(home)/extra\".")
        let again = try await client.request("DELETE", "/api/v0/context/sources/" + encoded)
        #expect(again.status == 404 && jsonObject(again.body)?["detail"] as? String == "source not found", "\(again)")

        // Bad paths and bodies: 400 with the reference's texts.
        let relative = try await client.request("POST", "/api/v0/context/sources", json: #"{"path":"notes"}"#)
        #expect(relative.status == 400 && jsonObject(relative.body)?["message"] as? String == "Could not add context source.")
        #expect(jsonObject(relative.body)?["detail"] as? String == "canonicalize: path \"notes\" is not absolute", "\(relative)")
        let empty = try await client.request("POST", "/api/v0/context/sources", json: #"{"path":"  "}"#)
        #expect(empty.status == 400 && jsonObject(empty.body)?["detail"] as? String == "canonicalize: path is empty", "\(empty)")
        let outside = try await client.request("POST", "/api/v0/context/sources", json: #"{"path":"/etc"}"#)
        #expect(outside.status == 400 && jsonObject(outside.body)?["detail"] as? String == "path \"/etc\" is not inside any allowed root", "\(outside)")
        let notJSON = try await client.request("POST", "/api/v0/context/sources", json: "{path")
        #expect(notJSON.status == 400 && jsonObject(notJSON.body)?["message"] as? String == "Request body must be valid JSON.")
        // A NUL byte and a 300 KB path name no file: 400, nothing added.
        let nul = try await client.request("POST", "/api/v0/context/sources", json: #"{"path":"~/extra\u0000x"}"#)
        #expect(nul.status == 400 && jsonObject(nul.body)?["detail"] as? String == "canonicalize: path contains a NUL byte", "\(nul)")
        let long = try await client.request(
            "POST", "/api/v0/context/sources", json: #"{"path":"~/"# + String(repeating: "a", count: 300_000) + #""}"#)
        #expect(long.status == 400 && jsonObject(long.body)?["detail"] as? String == "canonicalize: path is longer than 4096 bytes", "\(long.status)")
        let nulShow = try await client.request("GET", "/api/v0/context/sources/%2Ftmp%00x")
        #expect(nulShow.status == 400, "\(nulShow)")
        let badShow = try await client.request("GET", "/api/v0/context/sources/notes")
        #expect(badShow.status == 400 && jsonObject(badShow.body)?["message"] as? String == "Invalid context source path.", "\(badShow)")
        let badDelete = try await client.request("DELETE", "/api/v0/context/sources/notes")
        #expect(badDelete.status == 400 && jsonObject(badDelete.body)?["message"] as? String == "Could not remove context source.")

        // The legacy view: the sanitised instruction file of the working directory.
        let legacy = try await client.request("GET", "/api/v0/context-config")
        let parts = jsonObject(legacy.body)?["parts"] as? [[String: Any]] ?? []
        #expect(legacy.status == 200 && parts.count == 1, "\(legacy)")
        #expect(parts.first?["type"] as? String == "context-file" && parts.first?["context_file_path"] as? String == workdir + "/AGENTS.md")
        #expect(parts.first?["context_file_content"] as? String == "# Project rules\nbe kinder")

        // The variables are read once and not inherited by children.
        let start = try await client.request(
            "POST", "/api/v0/processes/start", json: #"{"command":"echo ${CODER_AGENT_EXP_SKILLS_DIRS:-unset}"}"#)
        let id = try #require(jsonObject(start.body)?["id"] as? String)
        let out = try await client.request("GET", "/api/v0/processes/\(id)/output?wait=true")
        #expect(jsonObject(out.body)?["output"] as? String == "unset\n")

        agent.signal(SIGTERM)
        #expect(await agent.exitStatus() == 0, "\(agent.log)")
    }
}
