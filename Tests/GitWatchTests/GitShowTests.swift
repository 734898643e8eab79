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
        let plain = NSTemporaryDirectory() + "not-a-repo-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: plain, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: plain) }
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
            // The reference's texts, detail included.
            func expectError(_ response: RawHTTPClient.Response, _ status: Int, _ message: String, _ detail: String) throws {
                #expect(response.status == status)
                let body = try #require(jsonObject(response.body))
                #expect(body["message"] as? String == message)
                #expect(body["detail"] as? String == detail)
            }
            let missing = try await show("repo_root=\(root)&path=a.txt")
            try expectError(missing, 400, "Missing required query parameters.", "repo_root, path, and ref are required.")
            let notRepository = try await show("repo_root=\(plain)&path=a.txt&ref=HEAD")
            try expectError(notRepository, 400, "Not a git repository.", "\(plain) does not contain a .git directory.")
            let notFound = try await show("repo_root=\(root)&path=missing.txt&ref=HEAD")
            try expectError(notFound, 404, "File not found.", "missing.txt does not exist at ref HEAD.")
            let binary = try await show("repo_root=\(root)&path=bin.dat&ref=HEAD")
            #expect(binary.status == 422 && binary.bodyText.contains("binary file"))
            let big = try await show("repo_root=\(root)&path=big.txt&ref=HEAD")
            #expect(big.status == 422 && big.bodyText.contains("file too large"))
        }
    }

    /// A blob's size is read from its header before the blob: past 512 KiB only its first
    /// 8 KiB are read (streamed from a loose object), and a packed one is loaded for them
    /// only up to `fullReadLimit`. Before, `show` loaded every blob whole, however large,
    /// and checked its size after.
    @Test func largeBlobsAreJudgedWithoutBeingLoaded() async throws {
        let root = try await GitSnapshotterTests.makeRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        var binary = [UInt8](repeating: 0x61, count: 1 << 20)
        binary[100] = 0
        try TestFile.write(root + "/big.bin", binary)
        try TestFile.write(root + "/big.txt", String(repeating: "z", count: 1 << 20).utf8)
        try TestFile.write(root + "/small.txt", "small\n".utf8)
        try await GitSnapshotterTests.git(["add", "."], in: root)
        try await GitSnapshotterTests.git(["commit", "-q", "-m", "init"], in: root)
        func show(_ path: String, limit: Int) -> Result<String, GitSnapshotter.ShowFailure> {
            Result { () throws(GitSnapshotter.ShowFailure) in try GitSnapshotter.show(root: root, path: path, ref: "HEAD", fullReadLimit: limit) }
        }
        // Loose objects: streamed, nothing loaded whole even with no room for it.
        #expect(show("big.bin", limit: 0) == .failure(.binary))
        #expect(show("big.txt", limit: 0) == .failure(.tooLarge))
        #expect(show("small.txt", limit: 0) == .success("small\n"))
        guard case .failure(.notFound) = show("missing", limit: 0) else {
            Issue.record("a missing path is not found")
            return
        }
        try await GitSnapshotterTests.git(["gc", "-q"], in: root)
        // Packed: read whole for the binary check only within the limit.
        #expect(show("big.bin", limit: 2 << 20) == .failure(.binary))
        #expect(show("big.bin", limit: 512 << 10) == .failure(.tooLarge))
        #expect(show("big.txt", limit: 2 << 20) == .failure(.tooLarge))
        #expect(show("small.txt", limit: 0) == .success("small\n"))
    }
}
