import AgentCore
import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the issue asks beyond the reference: compare-and-swap, pagination, and what every
/// write and edit preserves.
@Suite(.timeLimit(.minutes(2)))
struct FileAPIBeyondReferenceTests {
    @Test func compareAndSwapWrites() async throws {
        try await withFilesServer { h in
            let path = h.file("cas.txt")
            try TestFile.write(path, "v1".utf8)
            let lines = try #require(jsonObject(try await h.get("read-file-lines?path=\(FilesHarness.q(path))").body))
            let v1 = try #require(lines["sha256"] as? String)
            #expect(v1 == SHA256.hex(Array("v1".utf8)))
            #expect((lines["mtime_unix_nano"] as? Int ?? 0) > 0)
            #expect(try await h.get("read-file?path=\(FilesHarness.q(path))").header("Coder-File-Sha256") == v1)

            let ok = try await h.post("write-file?path=\(FilesHarness.q(path))&expected_sha256=\(v1)", body: Array("v2".utf8))
            #expect(ok.status == 200)
            #expect(try #require(jsonObject(ok.body))["sha256"] as? String == SHA256.hex(Array("v2".utf8)))
            let stale = try await h.post("write-file?path=\(FilesHarness.q(path))&expected_sha256=\(v1)", body: Array("v3".utf8))
            #expect(stale.status == 409)
            let conflict = try #require(jsonObject(stale.body))
            #expect((conflict["files"] as? [[String: Any]])?.first?["current_sha256"] as? String == SHA256.hex(Array("v2".utf8)))
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "v2", "nothing written")
            #expect(try FileManager.default.contentsOfDirectory(atPath: h.directory).filter { $0.contains(".tmp.") }.isEmpty)
        }
    }

    /// The query as Go reads it (form encoding, as Go's `url.Values.Encode`, Python's
    /// `urlencode` and `URLSearchParams` send it): `+` is a space, a repeated name answers
    /// its first value, an empty pair is skipped. Before, `my+file.txt` was written, and the
    /// last `path` won.
    @Test func theQueryReadsAsGoReadsIt() async throws {
        try await withFilesServer { h in
            let spaced = h.file("my file.txt")
            let encoded = FilesHarness.q(spaced).replacingOccurrences(of: "%20", with: "+")
            #expect(encoded.contains("+"))
            let written = try await h.post("write-file?&path=\(encoded)", body: Array("spaced".utf8))
            #expect(written.status == 200)
            #expect((try? String(contentsOfFile: spaced, encoding: .utf8)) == "spaced")
            #expect(!FileManager.default.fileExists(atPath: h.file("my+file.txt")))
            let first = h.file("first.txt")
            let second = h.file("second.txt")
            let both = "write-file?path=\(FilesHarness.q(first))&path=\(FilesHarness.q(second))"
            let once = try await h.post(both, body: Array("one".utf8))
            #expect(once.status == 200)
            #expect(FileManager.default.fileExists(atPath: first) && !FileManager.default.fileExists(atPath: second))
        }
    }

    /// Eight writers that all saw the same content: exactly one wins.
    @Test func concurrentWritersWithTheSameExpectationOneWins() async throws {
        try await withFilesServer { h in
            let path = h.file("race.txt")
            try TestFile.write(path, "base".utf8)
            let base = SHA256.hex(Array("base".utf8))
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for writer in 0..<8 {
                    group.addTask {
                        try await h.post("write-file?path=\(FilesHarness.q(path))&expected_sha256=\(base)", body: Array("writer \(writer)".utf8)).status
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 200 }.count == 1, "\(statuses)")
            #expect(statuses.filter { $0 == 409 }.count == 7)
        }
    }

    @Test func compareAndSwapEdits() async throws {
        try await withFilesServer { h in
            let path = h.file("edit.txt")
            try TestFile.write(path, "alpha beta".utf8)
            let body = { (expected: String) in
                "{\"files\":[{\"path\":\"\(path)\",\"expected_sha256\":\"\(expected)\",\"edits\":[{\"old_text\":\"alpha\",\"new_text\":\"ALPHA\"}]}]}"
            }
            let stale = try await h.post("edit-files", json: body(String(repeating: "0", count: 64)))
            #expect(stale.status == 409)
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "alpha beta")
            let ok = try await h.post("edit-files", json: body(SHA256.hex(Array("alpha beta".utf8))))
            #expect(ok.status == 200)
            let files = try #require(jsonObject(ok.body)?["files"] as? [[String: Any]])
            #expect(files.first?["sha256"] as? String == SHA256.hex(Array("ALPHA beta".utf8)))
        }
    }

    /// Line endings, a missing final newline, a UTF-8 BOM and the mode survive an edit; a
    /// write keeps the mode.
    @Test func editsPreserveWhatTheyDoNotTouch() async throws {
        try await withFilesServer { h in
            let path = h.file("keep.txt")
            let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
            try TestFile.write(path, bom + Array("first\r\nsecond\r\nthird".utf8))
            chmod(path, 0o640)
            let response = try await h.post("edit-files", json: "{\"files\":[{\"path\":\"\(path)\",\"edits\":[{\"old_text\":\"second\\n\",\"new_text\":\"SECOND\\nextra\\n\"}]}]}")
            #expect(response.status == 200, "\(response)")
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            #expect(bytes == bom + Array("first\r\nSECOND\r\nextra\r\nthird".utf8))
            var info = stat()
            stat(path, &info)
            #expect(info.st_mode & 0o777 == 0o640)
        }
    }

    /// Pages over 10 000 entries while entries are being added: every entry that was there
    /// from the start appears exactly once, in order.
    @Test func paginationIsStableUnderChanges() async throws {
        try await withFilesServer { h in
            let directory = h.file("many")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let names = (0..<10_000).map { String(format: "file-%05d", $0) }
            // 10 000 files made on a thread of its own, off the cooperative threads the
            // server under test needs.
            await onThread { for name in names { close(open(directory + "/" + name, O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)) } }
            var seen: [String] = []
            var cursor: String?
            var pages = 0
            repeat {
                let query = "list-directory?path=\(FilesHarness.q(directory))&limit=1000" + (cursor.map { "&cursor=\($0)" } ?? "")
                let page = try #require(jsonObject(try await h.post(query, json: "{}").body))
                let contents = try #require(page["contents"] as? [[String: Any]])
                seen += contents.compactMap { $0["name"] as? String }
                cursor = page["next_cursor"] as? String
                // Someone adds files meanwhile, before and after the page boundary.
                close(open(directory + "/aaa-\(pages)", O_CREAT | O_WRONLY | O_CLOEXEC, 0o644))
                close(open(directory + "/zzz-\(pages)", O_CREAT | O_WRONLY | O_CLOEXEC, 0o644))
                pages += 1
            } while cursor != nil && pages < 100
            let original = seen.filter { $0.hasPrefix("file-") }
            #expect(original == names, "each original entry once, in order")
            #expect(Set(seen).count == seen.count, "no entry twice")
            // Without limit or cursor the reference's shape: no next_cursor.
            let whole = try #require(jsonObject(try await h.post("list-directory?path=\(FilesHarness.q(directory))", json: "{}").body))
            #expect(whole["next_cursor"] == nil)
            #expect(try await h.post("list-directory?path=\(FilesHarness.q(directory))&cursor=zz", json: "{}").status == 400)
        }
    }

    /// An `expected_sha256` that is not 64 hex digits is a client's mistake (400 naming the
    /// field), not a conflict (409): no file can have that hash.
    @Test func aMalformedExpectedHashIsRefused() async throws {
        try await withFilesServer { h in
            let path = h.file("cas.txt")
            try TestFile.write(path, "v1".utf8)
            let good = SHA256.hex(Array("v1".utf8))
            for bad in ["xyz", String(good.dropLast()), good + "0", String(repeating: "g", count: 64)] {
                let write = try await h.post("write-file?path=\(FilesHarness.q(path))&expected_sha256=\(bad)", body: Array("v2".utf8))
                #expect(write.status == 400, "\(bad): \(write)")
                #expect(write.bodyText.contains(#""field":"expected_sha256""#), "\(write)")
                let edit = try await h.post(
                    "edit-files",
                    json: "{\"files\":[{\"path\":\"\(path)\",\"expected_sha256\":\"\(bad)\",\"edits\":[{\"old_text\":\"v1\",\"new_text\":\"v2\"}]}]}")
                #expect(edit.status == 400, "\(bad): \(edit)")
                #expect(edit.bodyText.contains(#""field":"files[0].expected_sha256""#), "\(edit)")
            }
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "v1", "nothing was written")
            // Upper-case hex is the same hash.
            let upper = try await h.post("write-file?path=\(FilesHarness.q(path))&expected_sha256=\(good.uppercased())", body: Array("v2".utf8))
            #expect(upper.status == 200, "\(upper)")
        }
    }
}
