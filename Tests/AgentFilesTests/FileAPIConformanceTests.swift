import AgentCore
import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The reference's behaviour (reads, writes, lists, and the create and move endpoints) through real files and the
/// real HTTP server.
@Suite(.timeLimit(.minutes(3)))
struct FileAPIConformanceTests {
    static let chat = "6f1c3a9e-1b2c-4d5e-8f90-1a2b3c4d5e6f"
    static let ancestor = "0d9c8b7a-6e5f-4a3b-9c2d-1e0f9a8b7c6d"

    /// A file where a directory must be (ENOTDIR): 500 on a read, as the reference's error is
    /// neither not-exist nor permission; 400 where parents are made (a file as a parent).
    @Test func aFileUsedAsADirectory() async throws {
        try await withFilesServer { h in
            let file = h.file("plain.txt")
            try TestFile.write(file, "x".utf8)
            #expect(try await h.get("read-file?path=\(FilesHarness.q(file + "/inner"))").status == 500)
            #expect(try await h.post("write-file?path=\(FilesHarness.q(file + "/inner/new.txt"))", body: Array("y".utf8)).status == 400)
        }
    }

    // 1.
    @Test func readFileByteRanges() async throws {
        try await withFilesServer { h in
            let path = h.file("content.txt")
            try TestFile.write(path, "content".utf8)
            func read(_ query: String) async throws -> RawHTTPClient.Response {
                try await h.get("read-file?path=\(FilesHarness.q(path))" + query)
            }
            #expect(try await read("&limit=1").bodyText == "c")
            #expect(try await read("&offset=1").bodyText == "ontent")
            let past = try await read("&offset=100")
            #expect(past.status == 200 && past.body.isEmpty)
            #expect(try await read("&offset=-1").status == 400)
            #expect(try await read("&unknown=1").status == 400)
            #expect(try await read("").header("Content-Type")?.hasPrefix("text/plain") == true)
            let png = h.file("image.png")
            try TestFile.write(png, [0x89, 0x50])
            #expect(try await h.get("read-file?path=\(FilesHarness.q(png))").header("Content-Type") == "image/png")
            // A file larger than one read chunk streams whole.
            let big = h.file("big.bin")
            let bytes = (0..<(300 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            try TestFile.write(big, bytes)
            let whole = try await h.get("read-file?path=\(FilesHarness.q(big))")
            #expect(whole.body == bytes)
        }
    }

    // 2.
    @Test func pathErrors() async throws {
        try await withFilesServer { h in
            for relative in ["./rel", "rel"] {
                let response = try await h.get("read-file?path=\(relative)")
                #expect(response.status == 400)
                #expect(response.bodyText.contains("file path must be absolute: \\\"\(relative)\\\""))
                let lines = try await h.get("read-file-lines?path=\(relative)")
                #expect(lines.status == 200 && lines.bodyText.contains("\"success\":false") && lines.bodyText.contains("must be absolute"))
            }
            #expect(try await h.get("read-file?path=\(FilesHarness.q(h.directory))").status == 400)
            #expect(try await h.get("read-file?path=\(FilesHarness.q(h.file("missing")))").status == 404)
            let locked = h.file("locked")
            try TestFile.write(locked, "secret".utf8)
            chmod(locked, 0)
            if geteuid() == 0 {
                print("skipped: the 403 case needs a non-root server (root reads a mode-000 file)")
            } else {
                #expect(try await h.get("read-file?path=\(FilesHarness.q(locked))").status == 403)
            }
        }
    }

    // 3.
    @Test func readFileLines() async throws {
        try await withFilesServer { h in
            let path = h.file("lines.txt")
            try TestFile.write(path, "line1\nline2\nline3".utf8)
            let all = try await h.get("read-file-lines?path=\(FilesHarness.q(path))")
            let json = try #require(jsonObject(all.body))
            #expect(json["content"] as? String == "1\tline1\n2\tline2\n3\tline3")
            #expect(json["success"] as? Bool == true && json["total_lines"] as? Int == 3 && json["lines_read"] as? Int == 3)
            #expect(json["error"] == nil, "empty keys are left out")
            let one = try #require(jsonObject(try await h.get("read-file-lines?path=\(FilesHarness.q(path))&offset=2&limit=1").body))
            #expect(one["content"] as? String == "2\tline2")
            let beyond = try #require(jsonObject(try await h.get("read-file-lines?path=\(FilesHarness.q(path))&offset=100").body))
            #expect((beyond["error"] as? String)?.hasPrefix("offset 100 is beyond the file length of 3 lines") == true)
            let long = h.file("long.txt")
            try TestFile.write(long, Array(repeating: UInt8(ascii: "x"), count: 1025))
            let cut = try #require(jsonObject(try await h.get("read-file-lines?path=\(FilesHarness.q(long))").body))
            #expect(cut["content"] as? String == "1\t" + String(repeating: "x", count: 1024) + "... [truncated]")
            let huge = h.file("huge.txt")
            try TestFile.write(huge, Array(repeating: UInt8(ascii: "y"), count: (1 << 20) + 1))
            let refused = try #require(jsonObject(try await h.get("read-file-lines?path=\(FilesHarness.q(huge))").body))
            #expect((refused["error"] as? String)?.contains("exceeds the maximum of 1048576 bytes") == true)
            let missing = try #require(jsonObject(try await h.get("read-file-lines?path=\(FilesHarness.q(h.file("nope")))").body))
            #expect(missing["error"] as? String == "file does not exist: \(h.file("nope"))")
        }
    }

    /// The reference's exact answers for an empty file, the budgets and
    /// every other failure (`{"success":false,"error":…}` and nothing else).
    @Test func readFileLinesAnswersExactlyAsTheReference() async throws {
        try await withFilesServer { h in
            let empty = h.file("empty.txt")
            try TestFile.write(empty, [UInt8]())
            #expect(try await Self.answer(h, "read-file-lines?path=\(FilesHarness.q(empty))") == ["success": true])
            // The file changes between two reads: one line now.
            try TestFile.write(empty, "x".utf8)
            #expect(try await h.get("read-file-lines?path=\(FilesHarness.q(empty))").bodyText.contains(#""content":"1\tx""#))

            let path = h.file("ten.txt")
            try TestFile.write(path, (1...10).map { "line \($0)" }.joined(separator: "\n").utf8)
            let q = FilesHarness.q(path)
            #expect(
                try await Self.answer(h, "read-file-lines?path=\(q)&max_response_bytes=20")
                    == ["success": false, "error": "output would exceed 20 bytes. Read less at a time using offset and limit parameters."])
            #expect(
                try await Self.answer(h, "read-file-lines?path=\(q)&limit=5&max_response_lines=4")
                    == ["success": false, "error": "output would exceed 4 lines. Read less at a time using offset and limit parameters."])
            // A limit above the line budget fails only when the file has more lines to give.
            let fits = try #require(jsonObject(try await h.get("read-file-lines?path=\(q)&offset=8&limit=5&max_response_lines=4").body))
            #expect(fits["success"] as? Bool == true && fits["lines_read"] as? Int == 3)
            // Exactly the budget passes: "1\tline 1" is 8 bytes, plus the joiner and "2\tline 2".
            let exact = try #require(jsonObject(try await h.get("read-file-lines?path=\(q)&limit=2&max_response_bytes=17").body))
            #expect(exact["content"] as? String == "1\tline 1\n2\tline 2")
            #expect(try await h.get("read-file-lines?path=\(q)&limit=2&max_response_bytes=16").bodyText.contains("output would exceed 16 bytes"))
            #expect(
                try await Self.answer(h, "read-file-lines?path=\(q)&offset=11")
                    == ["success": false, "error": "offset 11 is beyond the file length of 10 lines"])
        }
    }

    /// A JSON answer as a dictionary, to compare keys and values exactly.
    static func answer(_ h: FilesHarness, _ target: String) async throws -> NSDictionary {
        try #require(jsonObject(try await h.get(target).body) as NSDictionary?)
    }

    // 4, 10.
    @Test func writeFile() async throws {
        try await withFilesServer { h in
            let nested = h.file("a/b/c.txt")
            let headers = [("Coder-Chat-Id", Self.chat), ("Coder-Ancestor-Chat-Ids", "[\"\(Self.ancestor)\"]")]
            let written = try await h.post("write-file?path=\(FilesHarness.q(nested))", body: Array("hello".utf8), headers: headers)
            #expect(written.status == 200)
            #expect(written.bodyText.contains("Successfully wrote to \\\"\(nested)\\\""))
            #expect(try String(contentsOfFile: nested, encoding: .utf8) == "hello")
            var info = stat()
            stat(h.file("a/b"), &info)
            #expect(info.st_mode & 0o777 == 0o755, "parents are made 0755")
            // Both the chat and its ancestor have the path; a header-less write adds nothing.
            #expect(h.chatPaths.paths(chat: Self.chat) == [nested])
            #expect(h.chatPaths.paths(chat: Self.ancestor) == [nested])
            _ = try await h.post("write-file?path=\(FilesHarness.q(h.file("other.txt")))", body: Array("x".utf8))
            #expect(h.chatPaths.chatCount == 2)

            #expect(try await h.post("write-file?path=\(FilesHarness.q(h.file("a")))", body: Array("x".utf8)).status == 400)
            #expect(try await h.post("write-file?path=\(FilesHarness.q(nested + "/under"))", body: Array("x".utf8)).status == 400)
            // A failed write records nothing.
            _ = try await h.post("write-file?path=\(FilesHarness.q(h.file("a")))", body: Array("x".utf8), headers: headers)
            #expect(h.chatPaths.paths(chat: Self.chat) == [nested])

            // The mode stays; a symbolic link stays a link and the write lands in its target.
            let script = h.file("run.sh")
            _ = FileManager.default.createFile(atPath: script, contents: Data("old".utf8), attributes: [.posixPermissions: 0o755])
            _ = try await h.post("write-file?path=\(FilesHarness.q(script))", body: Array("new".utf8))
            stat(script, &info)
            #expect(info.st_mode & 0o777 == 0o755)
            let link = h.file("link.sh")
            symlink(script, link)
            _ = try await h.post("write-file?path=\(FilesHarness.q(link))", body: Array("through".utf8))
            var linkInfo = stat()
            lstat(link, &linkInfo)
            #expect(linkInfo.st_mode & S_IFMT == S_IFLNK)
            #expect(try String(contentsOfFile: script, encoding: .utf8) == "through")
            // Beyond the 1 MiB cap of other bodies: a write streams.
            let large = [UInt8](repeating: 0x41, count: 3 << 20)
            #expect(try await h.post("write-file?path=\(FilesHarness.q(h.file("large.bin")))", body: large).status == 200)
            #expect(try Data(contentsOf: URL(fileURLWithPath: h.file("large.bin"))).count == 3 << 20)
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: h.directory).filter { $0.contains(".tmp.") }
            #expect(leftovers.isEmpty)
        }
    }

    /// A body that stops mid-way (the client vanishes) leaves the original intact and no
    /// temporary file behind.
    @Test func vanishingWriterLeavesNoTrace() async throws {
        try await withFilesServer { h in
            let path = h.file("keep.txt")
            try TestFile.write(path, "original".utf8)
            do {
                let socket = try #require(await LoopbackSocket.connect(port: h.client.port))
                socket.send("POST /api/v0/write-file?path=\(FilesHarness.q(path)) HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + String(repeating: "z", count: 5000))
                try await Task.sleep(for: .milliseconds(200))
            }
            // The socket is closed now (released): the handler sees the body fail.
            #expect(
                await eventually {
                    let names = (try? FileManager.default.contentsOfDirectory(atPath: h.directory)) ?? []
                    return !names.contains { $0.contains(".tmp.") }
                }, "the temporary file is removed")
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "original")
        }
    }

    @Test func resolveListCreateMove() async throws {
        try await withFilesServer { h in
            try FileManager.default.createDirectory(atPath: h.file("real/dir"), withIntermediateDirectories: true)
            symlink(h.file("real"), h.file("alias"))
            let resolved = try #require(jsonObject(try await h.get("resolve-path?path=\(FilesHarness.q(h.file("alias/dir/../dir/missing/x")))").body))
            let realDirectory = try PathResolverCheck.real(h.directory)
            #expect(resolved["resolved_path"] as? String == realDirectory + "/real/dir/missing/x")
            #expect(try await h.get("resolve-path?path=relative").status == 400)

            try TestFile.write(h.file("b.txt"), [UInt8]())
            try TestFile.write(h.file(".hidden"), [UInt8]())
            let listing = try #require(jsonObject(try await h.post("list-directory?path=\(FilesHarness.q(h.directory))", json: "{}").body))
            let names = (listing["contents"] as? [[String: Any]])?.compactMap { $0["name"] as? String }
            #expect(names == ["real", ".hidden", "alias", "b.txt"], "directories first, then byte order; a link is not a directory")
            let home = try #require(jsonObject(try await h.post("list-directory", json: #"{"path":["real"],"relativity":"home"}"#).body))
            #expect(home["absolute_path_string"] as? String == h.file("real"))
            #expect(try await h.post("list-directory", json: "").status == 400)
            #expect(try await h.post("list-directory?path=\(FilesHarness.q(h.file("nope")))", json: "{}").status == 404)

            let headers = [("Coder-Chat-Id", Self.chat)]
            #expect(try await h.post("create-directory", json: "{\"path\":\"\(h.file("made/deep"))\",\"parents\":true}", headers: headers).status == 200)
            #expect(try await h.post("create-directory", json: "{\"path\":\"\(h.file("made/deep"))\"}").status == 200, "idempotent")
            // A dangling link where the directory should be is not one (Go's MkdirAll: "file
            // exists"); it was a 200 with nothing made, and a write-file under it followed it.
            #expect(symlink("/nonexistent-\(UUID().uuidString)/zz", h.file("dangling")) == 0)
            let dangling = try await h.post("create-directory", json: "{\"path\":\"\(h.file("dangling"))\",\"parents\":true}")
            #expect(dangling.status == 500 && dangling.bodyText.contains("file exists"), "\(dangling.bodyText)")
            let under = try await h.post("write-file?path=\(FilesHarness.q(h.file("dangling/x.txt")))", body: Array("x".utf8))
            #expect(under.status != 200, "\(under.bodyText)")
            #expect(try await h.post("move-file", json: "{\"source\":\"\(h.file("b.txt"))\",\"dest\":\"\(h.file("made/c.txt"))\"}", headers: headers).status == 200)
            #expect(FileManager.default.fileExists(atPath: h.file("made/c.txt")))
            try TestFile.write(h.file("d.txt"), [UInt8]())
            #expect(try await h.post("move-file", json: "{\"source\":\"\(h.file("d.txt"))\",\"dest\":\"\(h.file("made/c.txt"))\"}").status == 409)
            #expect(try await h.post("move-file", json: "{\"source\":\"\(h.file("d.txt"))\",\"dest\":\"\(h.file("made/c.txt"))\",\"overwrite\":true}").status == 200)
            #expect(try await h.post("move-file", json: "{\"source\":\"\(h.file("gone"))\",\"dest\":\"\(h.file("x"))\"}").status == 404)
            #expect(Set(h.chatPaths.paths(chat: Self.chat)) == [h.file("made/deep"), h.file("b.txt"), h.file("made/c.txt")])
        }
    }
}

enum PathResolverCheck {
    /// The real path of an existing directory (the temporary directory may itself be a link).
    static func real(_ path: String) throws -> String {
        guard let resolved = realpath(path, nil) else { throw CocoaError(.fileNoSuchFile) }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
