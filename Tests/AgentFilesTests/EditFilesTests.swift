import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Edits as the reference makes them, and cross-file rollback beyond the reference.
@Suite(.timeLimit(.minutes(3)))
struct EditFilesTests {
    static func body(_ files: [(String, [(String, String, Bool)])], diff: Bool = false) -> String {
        let entries = files.map { path, edits in
            let list = edits.map { old, new, all in
                "{\"old_text\":\(jsonString(old)),\"new_text\":\(jsonString(new))\(all ? ",\"replace_all\":true" : "")}"
            }.joined(separator: ",")
            return "{\"path\":\(jsonString(path)),\"edits\":[\(list)]}"
        }.joined(separator: ",")
        return "{\"files\":[\(entries)]\(diff ? ",\"include_diff\":true" : "")}"
    }

    static func jsonString(_ text: String) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: text, options: .fragmentsAllowed), as: UTF8.self)
    }

    func write(_ text: String, _ path: String) throws { try TestFile.write(path, text.utf8) }
    func read(_ path: String) throws -> String { try String(contentsOfFile: path, encoding: .utf8) }

    // 5.
    @Test func sequentialEditsAndAmbiguity() async throws {
        try await withFilesServer { h in
            let path = h.file("a.txt")
            try write("foo bar", path)
            let ambiguous = try await h.post("edit-files", json: Self.body([(path, [("foo", "bar", false), ("bar", "qux", false)])]))
            #expect(ambiguous.status == 400)
            #expect(ambiguous.bodyText.contains("matches 2 occurrences"))
            #expect(try read(path) == "foo bar", "nothing written")
            let all = try await h.post("edit-files", json: Self.body([(path, [("foo", "bar", false), ("bar", "qux", true)])]))
            #expect(all.status == 200)
            #expect(try read(path) == "qux qux")
            // The older key names are still read.
            try write("old", path)
            #expect(try await h.post("edit-files", json: "{\"files\":[{\"path\":\"\(path)\",\"edits\":[{\"search\":\"old\",\"replace\":\"new\"}]}]}").status == 200)
            #expect(try read(path) == "new")
            #expect(try await h.post("edit-files", json: Self.body([(path, [("", "x", false)])])).status == 400, "an empty search")
            #expect(try await h.post("edit-files", json: "{\"files\":[]}").bodyText.contains("must specify at least one file"))
        }
    }

    // 6.
    @Test func nothingIsWrittenWhenAnyFileFails() async throws {
        try await withFilesServer { h in
            let good = h.file("good.txt")
            try write("hello", good)
            let response = try await h.post(
                "edit-files",
                json: Self.body([
                    (good, [("hello", "HELLO", false)]), (h.file("missing.txt"), [("x", "y", false)]), (good + "x", [("a", "b", false)]),
                ]))
            #expect(response.status == 404, "the highest status of the problems")
            #expect(response.bodyText.contains("missing.txt") && response.bodyText.contains("good.txtx"))
            #expect(try read(good) == "hello")
        }
    }

    // 7.
    @Test func fuzzyMatching() async throws {
        try await withFilesServer { h in
            let code = h.file("code.go")
            try write("func f() {\n\tif x {\n\t\treturn 1\n\t}\n}\n", code)
            // Spaces where the file has tabs, one level too shallow; the inserted line gets tabs.
            let fuzzy = try await h.post("edit-files", json: Self.body([(code, [("if x {\n    return 1\n}", "if x {\n    log()\n    return 1\n}", false)])]))
            #expect(fuzzy.status == 200, "\(fuzzy)")
            #expect(try read(code) == "func f() {\n\tif x {\n\t\tlog()\n\t\treturn 1\n\t}\n}\n")

            let crlf = h.file("crlf.txt")
            try write("one\r\ntwo\r\nthree\r\n", crlf)
            #expect(try await h.post("edit-files", json: Self.body([(crlf, [("one\ntwo\n", "ONE\nTWO\n", false)])])).status == 200)
            #expect(try read(crlf) == "ONE\r\nTWO\r\nthree\r\n", "CRLF kept")

            let fold = h.file("fold.txt")
            try write("line\nbar\n", fold)
            #expect(try await h.post("edit-files", json: Self.body([(fold, [("line\n", "LINE", false)])])).status == 200)
            #expect(try read(fold) == "LINEbar\n")

            let blanks = h.file("blanks.txt")
            try write("a\n\nb\n", blanks)
            let missing = try await h.post("edit-files", json: Self.body([(blanks, [("a\nb", "c", false)])]))
            #expect(missing.status == 400 && missing.bodyText.contains("not found"), "blank lines count")

            let noNewline = h.file("nonl.txt")
            try write("x = 1\ny = 2", noNewline)
            #expect(try await h.post("edit-files", json: Self.body([(noNewline, [("y = 2  ", "y = 3", false)])])).status == 200)
            #expect(try read(noNewline) == "x = 1\ny = 3", "a missing final newline stays missing")
        }
    }

    /// A body of the wrong shape names the field by its path from the body's root, in Go's
    /// words (Go's `UnmarshalTypeError`: the innermost struct, then the field path).
    @Test(
        arguments: [
            (#"{"files":[1]}"#, "json: cannot unmarshal number into Go struct field FileEditRequest.files of type workspacesdk.FileEdits"),
            (#"{"files":[{"path":"/x","edits":{}}]}"#, "json: cannot unmarshal object into Go struct field FileEdits.files.edits of type []workspacesdk.FileEdit"),
            (#"{"files":[{"path":"/x","edits":["a"]}]}"#, "json: cannot unmarshal string into Go struct field FileEdits.files.edits of type workspacesdk.FileEdit"),
            (#"{"files":[{"path":"/x","edits":[{"old_text":1}]}]}"#, "json: cannot unmarshal number into Go struct field FileEdit.files.edits.old_text of type string"),
            (#"{"files":[{"path":1}]}"#, "json: cannot unmarshal number into Go struct field FileEdits.files.path of type string"),
        ] as [(String, String)])
    func wrongShapesNameTheField(json: String, detail: String) async throws {
        try await withFilesServer { h in
            let response = try await h.post("edit-files", json: json)
            #expect(response.status == 400)
            let body = try #require(jsonObject(response.body))
            #expect(body["message"] as? String == "Request body must be valid JSON.")
            #expect(body["detail"] as? String == detail)
        }
    }

    /// The splice rule per line position (lead, body, trail, ending): where
    /// search and replacement agree the file's bytes stay, otherwise the replacement's.
    @Test(
        arguments: [
            // The replacement spells out its indentation: taken as written (was five tabs).
            ("\t\t\tdeep()\n\t\t\tnested()", "\tdeep()\n\tnested()", "\t\t\tdeep()\n\t\t\tchanged()", false, "\t\t\tdeep()\n\t\t\tchanged()"),
            // The file's trailing spaces stay where search and replacement agree (none).
            ("foo   \nbar\t\t\nbaz", "foo\nbar\nbaz", "replaced", false, "replaced   "),
            ("hello   \nworld\nhello   \nagain", "hello\n", "bye\n", true, "bye   \nworld\nbye   \nagain"),
            // An inserted line between agreeing ends takes the file's unit at its depth.
            (
                "func f() {\n\tif x {\n\t\treturn 1\n\t}\n}\n", "if x {\n    return 1\n}", "if x {\n    log()\n    return 1\n}", false,
                "func f() {\n\tif x {\n\t\tlog()\n\t\treturn 1\n\t}\n}\n"
            ),
            // 4-space caller, 2-space file: one level deeper is two more spaces.
            ("a:\n  b: 1\n  c: 2\n", "b: 1 \nc: 2", "b: 1\n    d: 3\nc: 2", false, "a:\n  b: 1\n    d: 3\n  c: 2\n"),
            // A replacement that ends without a newline does not pull the next line onto it.
            ("x  \ny\nz\n", "x\ny", "w", false, "w  \nz\n"),
            // Unless the search ended with the newline it dropped: the next line folds on, as
            // on an exact match (`line\n` → `LINE`), here matched only with its spaces trimmed.
            ("x\n  line  \nbar\n", "line\n", "LINE", false, "x\n  LINE  bar\n"),
        ] as [(String, String, String, Bool, String)])
    func fuzzySpliceKeepsWhatSearchAndReplacementAgreeOn(file: String, search: String, replace: String, all: Bool, expected: String) async throws {
        try await withFilesServer { h in
            let path = h.file("splice.txt")
            try write(file, path)
            let response = try await h.post("edit-files", json: Self.body([(path, [(search, replace, all)])]))
            #expect(response.status == 200, "\(response)")
            #expect(try read(path) == expected)
        }
    }

    /// Pass 3 trims white space as Go's `strings.TrimSpace` does, non-ASCII white space
    /// included: a search line's stray no-break or ideographic space, or one at the edge of
    /// a file line, does not stop the match.
    @Test(
        arguments: [
            // A no-break space leading the search line.
            ("a\nx = 1\nb\n", "a\n\u{00A0}x = 1\n", "a\nx = 2\n", "a\nx = 2\nb\n"),
            // An ideographic space leading the search line.
            ("a\nx = 1\nb\n", "\u{3000}x = 1\nb", "x = 2\nb", "a\nx = 2\nb\n"),
            // An ideographic space ending the file's line.
            ("total = 1\u{3000}\nnext\n", "total = 1\nnext", "total = 2\nnext", "total = 2\nnext\n"),
            // A next-line character and a thin space around the file's line.
            ("a\n\u{0085}x = 1\u{2009}\nb\n", "a\nx = 1\n", "a\nx = 2\n", "a\nx = 2\nb\n"),
        ] as [(String, String, String, String)])
    func trimmedPassTrimsUnicodeWhiteSpace(file: String, search: String, replace: String, expected: String) async throws {
        try await withFilesServer { h in
            let path = h.file("unicode.txt")
            try write(file, path)
            let response = try await h.post("edit-files", json: Self.body([(path, [(search, replace, false)])]))
            #expect(response.status == 200, "\(response)")
            #expect(try read(path) == expected)
        }
    }

    /// Scalars Go does not count as white space stay part of the line: a zero-width space,
    /// a byte-order mark, a Mongolian vowel separator (white space before Unicode 6.3).
    @Test(arguments: ["\u{200B}", "\u{FEFF}", "\u{180E}"])
    func trimmedPassKeepsOtherInvisibleScalars(scalar: String) async throws {
        try await withFilesServer { h in
            let path = h.file("invisible.txt")
            let file = "a\n\(scalar)x = 1\nb\n"
            try write(file, path)
            let response = try await h.post("edit-files", json: Self.body([(path, [("a\nx = 1\n", "a\nx = 2\n", false)])]))
            #expect(response.status == 400 && response.bodyText.contains("not found"), "\(response)")
            #expect(try read(path) == file)
        }
    }

    // 8.
    @Test func diffs() async throws {
        try await withFilesServer { h in
            let first = h.file("first.txt")
            let second = h.file("second.txt")
            try write("hello world\n", first)
            try write("same\n", second)
            let response = try await h.post(
                "edit-files",
                json: Self.body(
                    [
                        (first, [("hello world", "HELLO world", false)]), (second, [("same", "same", false)]),
                    ], diff: true))
            let json = try #require(jsonObject(response.body))
            let files = try #require(json["files"] as? [[String: Any]])
            #expect(files.map { $0["path"] as? String } == [first, second], "request order, caller's paths")
            let diff = try #require(files[0]["diff"] as? String)
            #expect(diff.contains("--- \(first)") && diff.contains("-hello world") && diff.contains("+HELLO world"))
            #expect(files[1]["diff"] as? String == "", "a no-op has an empty diff")
        }
    }

    /// A `replace_all` over a large file with `include_diff`: the files are written, and the
    /// diffs of the request stop near their bound with `diff_truncated` (before, a 20 MB
    /// file's diff took minutes and gigabytes, past the request's time budget).
    @Test func aDiffPastItsBoundIsCutAndSaysSo() async throws {
        try await withFilesServer { h in
            let large = h.file("large.txt")
            let small = h.file("small.txt")
            // 2.7 MB of 100-byte lines: 5.5 MB of diff.
            let line = String(repeating: "a", count: 100) + "\n"
            try write(String(repeating: line, count: 27_000), large)
            try write("hello\n", small)
            let response = try await h.post(
                "edit-files",
                json: Self.body(
                    [(large, [(String(repeating: "a", count: 100), String(repeating: "b", count: 100), true)]), (small, [("hello", "bye", false)])],
                    diff: true))
            #expect(response.status == 200, "\(response.bodyText.prefix(300))")
            let files = try #require(jsonObject(response.body)?["files"] as? [[String: Any]])
            let diff = try #require(files.first?["diff"] as? String)
            #expect(files.first?["diff_truncated"] as? Bool == true)
            #expect(diff.utf8.count <= 4 << 20 && diff.utf8.count > 3 << 20, "\(diff.utf8.count) bytes")
            #expect(diff.hasPrefix("--- \(large)\n+++ \(large)\n@@ -1,"))
            // The second file's diff comes after the bound is spent: its first line still shows.
            #expect(files.last?["diff_truncated"] as? Bool == true)
            #expect((files.last?["diff"] as? String)?.contains("-hello") == true)
            #expect(try read(large).hasPrefix(String(repeating: "b", count: 100) + "\n") && (try read(small)) == "bye\n")
        }
    }

    // 9.
    @Test func duplicatesAndAliases() async throws {
        try await withFilesServer { h in
            let path = h.file("dup.txt")
            try write("one two", path)
            let merged = try await h.post(
                "edit-files",
                json: Self.body([
                    (path, [("one", "1", false)]), (h.directory + "/./dup.txt", [("two", "2", false)]),
                ]))
            #expect(merged.status == 200)
            #expect(try read(path) == "1 2")
            symlink(path, h.file("alias.txt"))
            let alias = try await h.post("edit-files", json: Self.body([(path, [("1", "x", false)]), (h.file("alias.txt"), [("2", "y", false)])]))
            #expect(alias.status == 400 && alias.bodyText.contains("aliases"))
            #expect(try read(path) == "1 2")
        }
    }

    /// Beyond the reference: if writing a later file fails, the earlier ones are restored.
    /// The second write fails because its temporary name (`.<name>.tmp.<8>`) is longer than
    /// a file name may be, while the name itself fits.
    @Test func crossFileRollback() async throws {
        try await withFilesServer { h in
            let first = h.file("first.txt")
            try write("alpha", first)
            let long = h.file(String(repeating: "n", count: 250))
            try write("gamma", long)
            let response = try await h.post(
                "edit-files",
                json: Self.body([
                    (first, [("alpha", "ALPHA", false)]), (long, [("gamma", "GAMMA", false)]),
                ]))
            #expect(response.status == 500, "\(response)")
            #expect(try read(first) == "alpha", "the first file is restored")
            #expect(try read(long) == "gamma")
        }
    }
}
