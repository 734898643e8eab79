import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import GitWatch

/// More shapes of repository, each compared with git's own output.
@Suite(.timeLimit(.minutes(3)))
struct GitSnapshotterEdgeTests {
    typealias G = GitSnapshotterTests

    func write(_ bytes: [UInt8], _ path: String) throws {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try TestFile.write(path, bytes)
    }

    @Test func binaryRenameAndLargeFilesMatchGit() async throws {
        let root = try await G.makeRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try write([0, 1, 2, 3], root + "/image.bin")
        try write(Array("a\nb\nc\nd\ne\nf\n".utf8), root + "/old-name.txt")
        try write(Array(String(repeating: "line of text\n", count: 80_000).utf8), root + "/large.txt")
        try await G.git(["add", "."], in: root)
        try await G.git(["commit", "-q", "-m", "init"], in: root)
        try write([0, 9, 9, 9], root + "/image.bin")
        try await G.git(["mv", "old-name.txt", "new-name.txt"], in: root)
        try write(Array((String(repeating: "line of text\n", count: 40_000) + "changed\n" + String(repeating: "line of text\n", count: 39_999)).utf8), root + "/large.txt")
        let snapshot = try GitSnapshotter.snapshot(root: root)
        let expected = try await G.git(["diff", "HEAD"], in: root)
        #expect(expected.contains("Binary files") && expected.contains("rename from"))
        #expect(snapshot.unifiedDiff == expected)
    }

    /// An untracked text file larger than what is left of the cap is left out without its
    /// patch being built: its patch holds all of it, and a 300 MiB file cost several times
    /// its size on every scan. A large binary file, whose patch is one line, still shows.
    @Test func aNewFileLargerThanTheCapIsLeftOutUnbuilt() async throws {
        let root = try await G.makeRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try write(Array("seed\n".utf8), root + "/a.txt")
        try await G.git(["add", "."], in: root)
        try await G.git(["commit", "-q", "-m", "init"], in: root)
        try write(Array("seed\nmore\n".utf8), root + "/a.txt")
        var binary = [UInt8](repeating: 0x41, count: 4 << 20)
        binary[10] = 0
        try write(binary, root + "/blob.bin")
        let line = String(repeating: "x", count: 79) + "\n"
        try write(Array(String(repeating: line, count: (8 << 20) / 80).utf8), root + "/huge.txt")
        let snapshot = try GitSnapshotter.snapshot(root: root)
        // Read on the same thread, no suspension between.
        let built = GitSnapshotter.lastDiffBuiltBytes
        #expect(snapshot.diffTruncated)
        #expect(snapshot.unifiedDiff.contains("+more"))
        #expect(snapshot.unifiedDiff.contains("Binary files /dev/null and b/blob.bin differ"))
        #expect(!snapshot.unifiedDiff.contains("huge.txt"))
        #expect(built < 64 << 10, "the 8 MiB file's patch was built (\(built) bytes)")
    }

    /// New files past libgit2's 512 MiB limit (sparse, so they cost no disk) show git's
    /// header for a binary file, without its `index` line (git hashes the whole file for it).
    /// Before, one of 4 GiB failed every scan of its repository (libgit2 keeps a working-tree
    /// size in 32 bits: it read as empty, then as changed), and one of 600 MiB got `old mode 0`
    /// and `/dev/null` on both sides.
    @Test func newFilesPastTheLimitShowGitsBinaryHeader() async throws {
        let root = try await G.makeRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try write(Array("seed\n".utf8), root + "/a.txt")
        try await G.git(["add", "."], in: root)
        try await G.git(["commit", "-q", "-m", "init"], in: root)
        try write(Array("seed\nmore\n".utf8), root + "/a.txt")
        for (name, size) in [("huge.sparse", Int64(4) << 30), ("large \"q\".bin", Int64(600) << 20)] {
            let fd = open(root + "/" + name, O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
            #expect(fd >= 0 && ftruncate(fd, off_t(size)) == 0)
            close(fd)
        }
        let snapshot = try GitSnapshotter.snapshot(root: root)
        let tracked = try await G.git(["diff", "HEAD"], in: root)
        #expect(snapshot.unifiedDiff.hasPrefix(tracked))
        #expect(
            snapshot.unifiedDiff.dropFirst(tracked.count)
                == "diff --git a/huge.sparse b/huge.sparse\nnew file mode 100644\nBinary files /dev/null and b/huge.sparse differ\n"
                + "diff --git \"a/large \\\"q\\\".bin\" \"b/large \\\"q\\\".bin\"\nnew file mode 100644\n"
                + "Binary files /dev/null and \"b/large \\\"q\\\".bin\" differ\n",
            "\(snapshot.unifiedDiff)")
        #expect(!snapshot.diffTruncated)
    }

    /// Tracked changes come before untracked files, as the reference's `git diff HEAD` and
    /// then its untracked batches, so a diff cut at the cap keeps the tracked change: an
    /// untracked `a.txt` sorted ahead of a modified `z.txt` pushed it out before.
    @Test func trackedChangesComeFirstAndSurviveTheCap() async throws {
        let root = try await G.makeRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try write(Array("one\n".utf8), root + "/z.txt")
        try await G.git(["add", "."], in: root)
        try await G.git(["commit", "-q", "-m", "init"], in: root)
        try write(Array("one\ntwo\n".utf8), root + "/z.txt")
        try write(Array(String(repeating: "untracked line\n", count: 100).utf8), root + "/a.txt")
        let whole = try GitSnapshotter.snapshot(root: root)
        let tracked = try await G.git(["diff", "HEAD"], in: root)
        #expect(whole.unifiedDiff.hasPrefix(tracked), "git diff HEAD's part first")
        #expect(whole.unifiedDiff.contains("+++ b/a.txt"))
        let cut = try GitSnapshotter.snapshot(root: root, maxDiffBytes: tracked.utf8.count + 100)
        #expect(cut.diffTruncated && cut.unifiedDiff == tracked, "the cap drops the untracked file, not the tracked change")
    }

    @Test func worktreesAndSubmodulesAreTheirOwnRoots() async throws {
        let root = try await G.makeRepository()
        let sub = try await G.makeRepository()
        defer {
            try? FileManager.default.removeItem(atPath: root)
            try? FileManager.default.removeItem(atPath: sub)
            try? FileManager.default.removeItem(atPath: root + "-wt")
        }
        try write(Array("x\n".utf8), root + "/x.txt")
        try write(Array("s\n".utf8), sub + "/s.txt")
        try await G.git(["add", "."], in: sub)
        try await G.git(["commit", "-q", "-m", "sub"], in: sub)
        try await G.git(["add", "."], in: root)
        try await G.git(["commit", "-q", "-m", "root"], in: root)
        try await G.git(["-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, "modules/sub"], in: root)
        try await G.git(["worktree", "add", "-q", root + "-wt"], in: root)
        func real(_ path: String) -> String { URL(fileURLWithPath: path).resolvingSymlinksInPath().path }
        #expect(GitSnapshotter.repositoryRoot(containing: root + "/modules/sub/s.txt").map(real) == real(root + "/modules/sub"))
        #expect(GitSnapshotter.repositoryRoot(containing: root + "-wt/x.txt").map(real) == real(root + "-wt"))
        #expect(GitSnapshotter.repositoryRoot(containing: root + "/x.txt").map(real) == real(root))
        try write(Array("changed\n".utf8), root + "-wt/x.txt")
        let worktree = try GitSnapshotter.snapshot(root: root + "-wt")
        #expect(worktree.unifiedDiff == (try await G.git(["diff", "HEAD"], in: root + "-wt")))
        #expect(!worktree.branch.isEmpty)
    }
}
