import Foundation
import Testing

@testable import AgentFiles
import AgentTestSupport

/// The edit-files diff's line comparison (LCS) at its bound.
struct UnifiedDiffTests {
    /// The fuzzer's timeout (session 12): `replace_all` turned 60 lines into 13 000, and the
    /// LCS compared byte arrays in each of its 4 million cells (20 s under the sanitizers).
    /// Lines are compared as numbers now; the script stays exact.
    @Test(.ownThreads) func theLCSAtItsBoundIsExact() {
        let old = (0..<2000).map { "line \($0 % 7)\n" }.joined()
        let new = (0..<2000).map { "line \($0 % 5)\n" }.joined()
        let a = TextLine.split(Array(old.utf8)).map { $0.text + $0.ending }
        let b = TextLine.split(Array(new.utf8)).map { $0.text + $0.ending }
        #expect(a.count * b.count <= UnifiedDiff.maxCells)
        let ops = UnifiedDiff.script(a, b)
        // The script rebuilds both texts.
        var i = 0
        var j = 0
        for op in ops {
            switch op {
            case .equal: #expect(a[i] == b[j]); i += 1; j += 1
            case .delete: i += 1
            case .insert: j += 1
            }
        }
        #expect(i == a.count && j == b.count)
        // An LCS: the common lines of "0..6" and "0..4" cycles are at least 5 in 7.
        #expect(ops.filter { $0 == .equal }.count >= 1400)
        let diff = UnifiedDiff.make(path: "/f", old: Array(old.utf8), new: Array(new.utf8))
        #expect(diff.hasPrefix("--- /f\n+++ /f\n@@ -"))
    }

    /// A window of more lines than the LCS takes is streamed from the bytes as one hunk,
    /// removed and added whole: the same text as GNU diff's for such a change (before, each
    /// line was copied into arrays of its own: gigabytes for a `replace_all` on 20 MB).
    @Test func aWindowTooLargeToCompareIsStreamedAsGNUDiffShowsIt() async throws {
        let keep = (0..<10).map { "keep \($0)\n" }.joined()
        let lines = UnifiedDiff.maxComparedLines + 10
        let old = keep + String(repeating: "old line\n", count: lines) + keep + "end"
        let new = keep + String(repeating: "new line\n", count: lines) + keep + "end"
        let diff = UnifiedDiff.make(path: "/f", old: Array(old.utf8), new: Array(new.utf8), limit: .max)
        #expect(!diff.truncated)
        let expected = try await gnuDiff(old, new)
        #expect(diff.text == expected, "\(diff.text.prefix(200)) against \(expected.prefix(200))")
    }

    /// Past its limit a diff stops at a whole line, and its last hunk's header counts the
    /// lines shown: what is there still reads as a diff.
    @Test func aDiffPastItsLimitStopsAtALineWithItsCountsRight() {
        let old = String(repeating: "old line\n", count: 100_000)
        let new = String(repeating: "new line\n", count: 100_000)
        for (a, b) in [(old, new), ("x\n" + old.prefix(3600), "y\n" + new.prefix(3600))] {
            let diff = UnifiedDiff.make(path: "/f", old: Array(a.utf8), new: Array(b.utf8), limit: 4096)
            #expect(diff.truncated)
            #expect(diff.text.utf8.count <= 4096)
            let body = diff.text.split(separator: "\n").dropFirst(2)
            let header = body.first
            let removed = body.filter { $0.hasPrefix("-") || $0.hasPrefix(" ") }.count
            let added = body.filter { $0.hasPrefix("+") || $0.hasPrefix(" ") }.count
            #expect(header == "@@ -1,\(removed) +\(added == 0 ? "0,0" : "1,\(added)") @@", "\(diff.text)")
            #expect(removed > 100)
        }
        // Under the limit: whole, not truncated.
        let small = UnifiedDiff.make(path: "/f", old: Array("a\n".utf8), new: Array("b\n".utf8), limit: 4096)
        #expect(small == .init(text: "--- /f\n+++ /f\n@@ -1 +1 @@\n-a\n+b\n", truncated: false))
    }

    /// `diff -u` of the two texts, labelled as the agent labels them.
    func gnuDiff(_ old: String, _ new: String) async throws -> String {
        let directory = NSTemporaryDirectory() + "udiff-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try TestFile.write(directory + "/old", Array(old.utf8))
        try TestFile.write(directory + "/new", Array(new.utf8))
        return await ChildProgram.run(["diff", "-u", "--label", "/f", "--label", "/f", directory + "/old", directory + "/new"]).stdout
    }
}
