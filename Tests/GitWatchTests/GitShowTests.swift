import AgentCore
import AgentHTTP
import AgentTestSupport
import Foundation
import GitWatch
import Hummingbird
import Logging
import Testing

/// `GET /api/v0/git/show` over a real server and repository.
@Suite(.timeLimit(.minutes(3)))
struct GitShowTests {
    @Test func showCases() async throws {
        let root = try await GitSnapshotterTests.makeRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try TestFile.write(root + "/a.txt", "committed\n".utf8)
        try TestFile.write(root + "/bin.dat", [0x00, 0x01, 0x02])
        try TestFile.write(root + "/big.txt", String(repeating: "z", count: (512 << 10) + 1).utf8)
        try await GitSnapshotterTests.git(["add", "."], in: root)
        try await GitSnapshotterTests.git(["commit", "-q", "-m", "init"], in: root)
        try TestFile.write(root + "/a.txt", "changed\n".utf8)

        let context = AgentContext.forTests(stateDirectory: root)
        try await withAgentServer([HTTPMount(GitWatchModule(context: context), at: "/api/v0/git")]) { port in
            let client = RawHTTPClient(port: port)
            func show(_ query: String) async throws -> RawHTTPClient.Response {
                try await client.request("GET", "/api/v0/git/show?" + query)
            }
            let ok = try await show("repo_root=\(root)&path=a.txt&ref=HEAD")
            #expect(ok.status == 200)
            #expect(try #require(jsonObject(ok.body))["contents"] as? String == "committed\n")
            #expect(try await show("repo_root=\(root)&path=a.txt").status == 400)
            #expect(try await show("repo_root=/tmp&path=a.txt&ref=HEAD").bodyText.contains("Not a git repository."))
            #expect(try await show("repo_root=\(root)&path=missing.txt&ref=HEAD").status == 404)
            let binary = try await show("repo_root=\(root)&path=bin.dat&ref=HEAD")
            #expect(binary.status == 422 && binary.bodyText.contains("binary file"))
            let big = try await show("repo_root=\(root)&path=big.txt&ref=HEAD")
            #expect(big.status == 422 && big.bodyText.contains("file too large"))
        }
    }
}
