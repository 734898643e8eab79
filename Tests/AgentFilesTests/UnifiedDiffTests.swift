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
}
