import AgentCore
import AgentHTTP
import AgentTestSupport
@testable import AgentFiles
import Foundation
import HTTPTypes
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Hostile and ordinary input that used to kill, freeze or bloat the agent: each
/// case crashed the server process, hung a thread or grew memory without bound before.
@Suite(.timeLimit(.minutes(2)))
struct FileAPIHardeningTests {
    /// `max_response_lines` near Int.max trapped adding it to the offset.
    @Test func hugeLineNumbersDoNotOverflow() async throws {
        try await withFilesServer { h in
            let path = h.file("lines.txt")
            try TestFile.write(path, "one\ntwo\nthree\n".utf8)
            for query in [
                "offset=2&max_response_lines=9223372036854775807",
                "offset=2&limit=9223372036854775807&max_response_lines=9223372036854775807",
                "offset=9223372036854775807", "max_file_size=9223372036854775807&max_line_bytes=9223372036854775807",
            ] {
                let response = try await h.get("read-file-lines?path=\(FilesHarness.q(path))&\(query)")
                #expect(response.status == 200, "\(query)")
            }
            let body = try #require(jsonObject(try await h.get("read-file-lines?path=\(FilesHarness.q(path))&offset=2&max_response_lines=9223372036854775807").body))
            #expect(body["content"] as? String == "2\ttwo\n3\tthree\n4\t")
        }
    }

    /// An age of 2^64 - 1 ms trapped converting to Int64.
    @Test func hugeToolCallAgeDoesNotOverflow() async throws {
        try await withFilesServer { h in
            let path = h.file("age.txt")
            let headers = [
                ("Coder-Chat-Id", "8a0c3a4e-6a3e-4b43-9c55-0c1f3b8d2a10"), ("Coder-Tool-Call-Message-Id", "1"),
                ("Coder-Tool-Call-Id", "call-1"), ("Coder-Tool-Call-Age-Ms", "18446744073709551615"),
            ]
            let response = try await h.post("write-file?path=\(FilesHarness.q(path))", body: Array("x".utf8), headers: headers)
            #expect(response.status == 409, "older than the agent: refused, not run")
            #expect(try await h.get("read-file-lines?path=\(FilesHarness.q(path))").status == 200, "the server is still up")
        }
    }

    /// One edit-files request over many large files holds at most ``EditRoutes/maxTotalBytes``
    /// of them and their edited copies: past it the request is refused (413) before more files
    /// are read (each file's own 64 MiB bound had let 20 000 files of a 1 MiB body hold them
    /// all). Checked with a bound of 8 MiB (files of 3 MiB), so a loaded host's debug build
    /// does not meet the request's 20 s work bound first.
    @Test func theFilesOfOneEditAreBoundedTogether() async throws {
        try await withFilesServer { h in
            var requested: [EditRoutes.Requested] = []
            for i in 0..<6 {
                let path = h.file("big\(i).bin")
                // "x" once, then zeros: the edit matches at once.
                #expect(FileManager.default.createFile(atPath: path, contents: Data("x".utf8)))
                #expect(truncate(path, 3 << 20) == 0)
                let edit = EditEngine.Edit(search: Array("x".utf8), replacement: Array("y".utf8), replaceAll: false)
                requested.append(EditRoutes.Requested(path: path, edits: [edit], expected: nil))
            }
            do {
                _ = try EditRoutes.apply(requested, maxTotal: 8 << 20)
                Issue.record("applied")
            } catch let error as APIError {
                #expect(error.status == .contentTooLarge, "\(error)")
                #expect(error.body.message.contains("the most one request holds"))
            }
            // Two files (12 MiB with their copies) were read, the rest never; nothing was written.
            for i in 0..<6 { #expect(try Data(contentsOf: URL(fileURLWithPath: h.file("big\(i).bin"))).first == UInt8(ascii: "x")) }
        }
    }

    /// /proc/self/pagemap reports size 0 and holds ~256 GiB: reads grew the agent without
    /// bound (read-file-lines, edit-files) or hashed for minutes (read-file).
    @Test func pseudoFilesAreReadWithABound() async throws {
        try await withFilesServer { h in
            let pagemap = "/proc/self/pagemap"
            let lines = try #require(jsonObject(try await h.get("read-file-lines?path=\(pagemap)").body))
            #expect(lines["success"] as? Bool == false)
            #expect((lines["error"] as? String)?.contains("more than 1048576 bytes") == true, "\(lines)")

            let raw = try await h.get("read-file?path=\(pagemap)")
            #expect(raw.status == 400)
            #expect(String(decoding: raw.body, as: UTF8.self).contains("holds more than"))
            let window = try await h.get("read-file?path=\(pagemap)&offset=0&limit=4096")
            #expect(window.status == 200)
            #expect(window.body.count == 4096)

            let edit = try await h.post(
                "edit-files", json: "{\"files\":[{\"path\":\"\(pagemap)\",\"edits\":[{\"old_text\":\"a\",\"new_text\":\"b\"}]}]}")
            #expect(edit.status == 400)
            #expect(String(decoding: edit.body, as: UTF8.self).contains("larger than"))

            // A small pseudo-file reads whole (it read as empty before).
            let status = try await h.get("read-file?path=/proc/self/status")
            #expect(status.status == 200)
            #expect(String(decoding: status.body, as: UTF8.self).contains("Pid:"))
            let statusLines = try #require(jsonObject(try await h.get("read-file-lines?path=/proc/self/status").body))
            #expect((statusLines["content"] as? String)?.contains("Pid:") == true)

            // A sysfs attribute reports 4096 bytes and holds a few: read whole (before: 503,
            // "changed while it was read", however often it was asked).
            let mtu = try await h.get("read-file?path=/sys/class/net/lo/mtu")
            #expect(mtu.status == 200, "\(mtu.bodyText)")
            #expect(Int(mtu.bodyText.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 > 0, "\(mtu.bodyText)")
            // A read the kernel fails: its error, not an unhandled one.
            let memory = try await h.get("read-file?path=/proc/self/mem")
            #expect(memory.status == 500 && memory.bodyText.contains("input/output error"), "\(memory.bodyText)")
        }
    }

    /// A FIFO blocked `open(2)` for ever: with `expected_sha256` while holding the global
    /// commit lock, so the whole file API stopped.
    @Test func fifosAreRefusedWithoutBlocking() async throws {
        try await withFilesServer { h in
            let fifo = h.file("pipe")
            #expect(mkfifo(fifo, 0o644) == 0)
            let write = try await h.post(
                "write-file?path=\(FilesHarness.q(fifo))&expected_sha256=\(SHA256.hex([]))", body: Array("x".utf8))
            #expect(write.status == 400)
            #expect(String(decoding: write.body, as: UTF8.self).contains("not a regular file"))
            let plain = try await h.post("write-file?path=\(FilesHarness.q(fifo))", body: Array("x".utf8))
            #expect(plain.status == 400, "a FIFO is not replaced by a file")
            var info = stat()
            #expect(lstat(fifo, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO)
            #expect(try await h.get("read-file?path=\(FilesHarness.q(fifo))").status == 400)
            let lines = try #require(jsonObject(try await h.get("read-file-lines?path=\(FilesHarness.q(fifo))").body))
            #expect(lines["error"] as? String == "not a file: \(fifo)")
            let edit = try await h.post(
                "edit-files", json: "{\"files\":[{\"path\":\"\(fifo)\",\"edits\":[{\"old_text\":\"a\",\"new_text\":\"b\"}]}]}")
            #expect(edit.status == 400)
            // Everything else still works.
            let other = h.file("other.txt")
            #expect(try await h.post("write-file?path=\(FilesHarness.q(other))&expected_sha256=", body: Array("ok".utf8)).status == 200)
        }
    }

    /// As root, an atomic replace made the file root's.
    @Test func atomicWritesKeepTheOwner() async throws {
        guard geteuid() == 0 else { return }
        try await withFilesServer { h in
            let path = h.file("owned.txt")
            try TestFile.write(path, "before".utf8)
            #expect(chown(path, 4321, 4322) == 0)
            #expect(chmod(path, 0o640) == 0)
            #expect(try await h.post("write-file?path=\(FilesHarness.q(path))", body: Array("after".utf8)).status == 200)
            let edit = try await h.post(
                "edit-files", json: "{\"files\":[{\"path\":\"\(path)\",\"edits\":[{\"old_text\":\"after\",\"new_text\":\"edited\"}]}]}")
            #expect(edit.status == 200)
            var info = stat()
            #expect(stat(path, &info) == 0)
            #expect(info.st_uid == 4321 && info.st_gid == 4322)
            #expect(info.st_mode & 0o7777 == 0o640)
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "edited")
            // A set-user-ID program keeps its bits (a chown after the chmod cleared them).
            let program = h.file("program")
            try TestFile.write(program, "#!/bin/sh\n".utf8)
            #expect(chown(program, 4321, 4322) == 0)
            #expect(chmod(program, 0o6755) == 0)
            #expect(try await h.post("write-file?path=\(FilesHarness.q(program))", body: Array("#!/bin/sh\ntrue\n".utf8)).status == 200)
            #expect(stat(program, &info) == 0)
            #expect(info.st_uid == 4321 && info.st_mode & 0o7777 == 0o6755, "mode \(String(info.st_mode & 0o7777, radix: 8))")
        }
    }

    /// A NUL cut the path: the call acted on the path before it and reported success.
    /// A streamed write whose chunked framing breaks (a chunk size of 18 hex digits) is the
    /// client's mistake: 400 `Malformed HTTP request.`, as on routes that collect their
    /// body, not 503 "The request was cancelled." (the broken input cancelled its wait).
    @Test func aMalformedChunkOnAStreamedWriteIs400() async throws {
        try await withFilesServer { files in
            let target = files.file("streamed.txt")
            for body in ["FFFFFFFFFFFFFFFFFF\r\nabc\r\n0\r\n\r\n", "3\r\nabc\r\nzz\r\n"] {
                let socket = try #require(await LoopbackSocket.connect(port: files.client.port))
                socket.send(
                    "POST /api/v0/write-file?path=\(FilesHarness.q(target)) HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
                let (bytes, _) = await socket.readAll(timeout: .seconds(30))
                let text = String(decoding: bytes, as: UTF8.self)
                #expect(String.httpStatus(of: bytes) == 400, "\(text)")
                #expect(text.contains("Malformed HTTP request."), "\(text)")
                #expect(!FileManager.default.fileExists(atPath: target), "nothing is written")
            }
        }
    }

    @Test func nulInPathsIsRefused() async throws {
        try await withFilesServer { h in
            let real = h.file("real.txt")
            try TestFile.write(real, "keep".utf8)
            let cut = FilesHarness.q(real) + "%00.bak"
            for response in [
                try await h.post("write-file?path=\(cut)", body: Array("lost".utf8)),
                try await h.get("read-file?path=\(cut)"),
                try await h.get("read-file-lines?path=\(cut)"),
                try await h.get("resolve-path?path=\(cut)"),
                try await h.post("create-directory", json: "{\"path\":\"\(h.file("dir"))\\u0000x\"}"),
                try await h.post("move-file", json: "{\"source\":\"\(real)\\u0000x\",\"dest\":\"\(h.file("moved"))\"}"),
                try await h.post("list-directory?path=\(FilesHarness.q(h.directory))%00x", json: "{}"),
                try await h.post(
                    "edit-files", json: "{\"files\":[{\"path\":\"\(real)\\u0000x\",\"edits\":[{\"old_text\":\"keep\",\"new_text\":\"lost\"}]}]}"),
            ] {
                #expect(response.status == 400)
                #expect(String(decoding: response.body, as: UTF8.self).contains("NUL"))
            }
            #expect(try String(contentsOfFile: real, encoding: .utf8) == "keep")
            #expect(!FileManager.default.fileExists(atPath: h.file("dir")))
            #expect(!FileManager.default.fileExists(atPath: h.file("moved")))
        }
    }

    /// A second reader's findings (session 12): one request must not crash the agent.
    /// An inserted line's indentation was the product of the caller's depth and the file's
    /// unit (1000 levels x 100 000 spaces = 100 MB here; 100 GB with bigger leads).
    @Test func anInsertedLinesIndentationIsBounded() async throws {
        try await withFilesServer { h in
            let path = h.file("wide.txt")
            let lead = String(repeating: " ", count: 100_000)
            try TestFile.write(path, "\(lead)a\n\(lead)b\n".utf8)
            let inserted = String(repeating: " ", count: 1000) + "c"
            let body = EditFilesTests.body([(path, [("a\n b", "a\n\(inserted)\n b", false)])])
            #expect(try await h.post("edit-files", json: body).status == 200)
            // The depth cannot be kept within bounds: the line takes its neighbour's lead.
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "\(lead)a\n\(lead)c\n\(lead)b\n")
        }
    }

    /// `replace_all` of a short search with a long replacement asked for the whole result
    /// at once (a 64 MiB file of one letter and a 1 KiB replacement: 67 GB).
    @Test func anEditsResultIsBounded() async throws {
        try await withFilesServer { h in
            let path = h.file("letters.txt")
            try TestFile.write(path, repeatElement(UInt8(ascii: "a"), count: 1 << 20))
            let body = EditFilesTests.body([(path, [("a", String(repeating: "b", count: 200), true)])])
            let refused = try await h.post("edit-files", json: body)
            #expect(refused.status == 400 && refused.bodyText.contains("larger than 134217728 bytes"), "\(refused.bodyText)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)).count == 1 << 20, "nothing written")
            // Within the bound it is done.
            let grown = try await h.post("edit-files", json: EditFilesTests.body([(path, [("a", "bb", true)])]))
            #expect(grown.status == 200)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)).count == 2 << 20)
        }
    }

    /// `mkdir -p` recursed once per component: a 200 KB path of `/a` ran the file thread
    /// out of stack.
    @Test func aVeryDeepDirectoryPathIsRefusedNotRecursed() async throws {
        try await withFilesServer { h in
            let deep = h.directory + String(repeating: "/a", count: 100_000)
            let refused = try await h.post("create-directory", json: "{\"path\":\"\(deep)\",\"parents\":true}")
            #expect(refused.status >= 400, "\(refused.status)")
            #expect(refused.bodyText.contains("name too long") || refused.bodyText.contains("File name too long"), "\(refused.bodyText)")
            // The agent still serves, and a path within the limit is made.
            #expect(try await h.post("create-directory", json: "{\"path\":\"\(h.file("x/y/z"))\",\"parents\":true}").status == 200)
        }
    }

    /// Matching was O(file lines x search lines): 43-71 s of CPU for this shape.
    @Test func pathologicalEditsMatchInLinearTime() async throws {
        try await withFilesServer { h in
            let path = h.file("many.txt")
            let file = String(repeating: "a \n", count: 200_000) + "b\n"
            try TestFile.write(path, file.utf8)
            let search = String(repeating: "a\\n", count: 100_000) + "b\\n"
            let edit = try await h.post(
                "edit-files", json: "{\"files\":[{\"path\":\"\(path)\",\"edits\":[{\"old_text\":\"\(search)\",\"new_text\":\"c\\n\"}]}]}")
            #expect(edit.status == 200, "\(String(decoding: edit.body.prefix(300), as: UTF8.self))")
            let after = try String(contentsOfFile: path, encoding: .utf8)
            // The first window line's trailing space stays (search and replacement agree on none).
            #expect(after == String(repeating: "a \n", count: 100_000) + "c \n")
        }
    }
}

/// Names that are not UTF-8: listed without loss, paginated, and addressable.
@Suite(.timeLimit(.minutes(3)))
struct NonUTF8NameTests {
    @Test func namesThatAreNotUTF8CanBeListedAndAddressed() async throws {
        try await withFilesServer { h in
            let directory = h.file("names")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            // Two Latin-1 names that both read as "caf\u{FFFD}..." through a lossy decoder.
            for (raw, content) in [([0x63, 0x61, 0x66, 0xE9] as [UInt8], "one"), ([0x63, 0x61, 0x66, 0xE9, 0xE9], "two"), (Array("plain".utf8), "three")] {
                let fd = (Array(directory.utf8) + [0x2F] + raw + [0]).withUnsafeBufferPointer {
                    $0.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT | O_TRUNC, 0o644) }
                }
                #expect(fd >= 0)
                _ = content.withCString { write(fd, $0, strlen($0)) }
                close(fd)
            }
            // Page by page: each name exactly once.
            var names: [String] = []
            var cursor: String?
            for _ in 0..<5 {
                let query = "list-directory?path=\(FilesHarness.q(directory))&limit=1" + (cursor.map { "&cursor=\($0)" } ?? "")
                let page = try #require(jsonObject(try await h.post(query, json: "{}").body))
                names += (page["contents"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
                cursor = page["next_cursor"] as? String
                if cursor == nil { break }
            }
            let e9 = String(Unicode.Scalar(FilePathText.escapeBase + 0xE9)!)
            #expect(names == ["caf" + e9, "caf" + e9 + e9, "plain"])
            // Addressed by the listed name: read and written byte for byte.
            let fetched = try await h.get("read-file?path=\(FilesHarness.q(directory + "/caf" + e9 + e9))")
            #expect(fetched.status == 200)
            #expect(String(decoding: fetched.body, as: UTF8.self) == "two")
            #expect(try await h.post("write-file?path=\(FilesHarness.q(directory + "/caf" + e9))", body: Array("ONE".utf8)).status == 200)
            let rawPath = Array(directory.utf8) + [0x2F, 0x63, 0x61, 0x66, 0xE9]
            let fd = (rawPath + [0]).withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_RDONLY) } }
            #expect(fd >= 0)
            var buffer = [UInt8](repeating: 0, count: 16)
            let n = read(fd, &buffer, 16)
            close(fd)
            #expect(Array(buffer.prefix(max(0, n))) == Array("ONE".utf8))
            // No file with the escape character's own UTF-8 was made.
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory).count == 3)
        }
    }

    @Test func textMappingIsABijection() {
        let samples: [[UInt8]] = [
            Array("plain ascii".utf8), [0xFF, 0xFE, 0x00, 0x41], [0xE9], Array("é漢字".utf8), [0xF4, 0x8F, 0xBC, 0x80],
            [0xC3], [0xED, 0xA0, 0x80], [0xF0, 0x9F, 0x98, 0x80, 0x80],
        ]
        for bytes in samples {
            #expect(FilePathText.encode(FilePathText.decode(bytes)) == bytes, "\(bytes)")
        }
        #expect(FilePathText.decode(Array("é".utf8)) == "é")
    }

    /// Found by the fuzz target FuzzFileRequests: path checks compared `Character`s, and a
    /// `/` followed by a combining mark is one. Such a path was "not absolute", and cleaning
    /// `d/\u{301}x/../y` dropped `d` too, so the write landed in the parent directory.
    @Test func pathsAreSplitOnSlashBytes() async throws {
        // Every byte but unreserved ASCII percent-encoded (`q` leaves combining marks as they are).
        func q(_ path: String) -> String {
            path.utf8.map { byte in
                byte < 0x80 && (Character(Unicode.Scalar(byte)).isLetter || Character(Unicode.Scalar(byte)).isNumber || "/-._~".utf8.contains(byte))
                    ? String(Unicode.Scalar(byte)) : String(format: "%%%02X", byte)
            }.joined()
        }
        try await withFilesServer { h in
            let written = try await h.post("write-file?path=\(q(h.directory + "/\u{301}x/../y.txt"))", body: Array("y".utf8))
            #expect(written.status == 200, "\(String(decoding: written.body, as: UTF8.self))")
            #expect(FileManager.default.fileExists(atPath: h.file("y.txt")), "not written in the directory the path names")
            let lines = try #require(jsonObject(try await h.get("read-file-lines?path=\(q("/\u{301}missing"))").body))
            #expect((lines["error"] as? String)?.hasPrefix("file does not exist") == true, "\(lines)")
        }
    }
}
