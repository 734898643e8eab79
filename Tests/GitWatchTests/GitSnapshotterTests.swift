import AgentTestSupport
import Foundation
import GitWatch
import Testing

/// Snapshots of real repositories made with the git CLI, compared with git's own output.
@Suite(.timeLimit(.minutes(3)))
struct GitSnapshotterTests {
    /// Runs git in `directory`; returns its stdout.
    @discardableResult
    public static func git(_ arguments: [String], in directory: String) async throws -> String {
        await GitCLI.run(arguments, in: directory)
    }

    public static func makeRepository() async throws -> String {
        let root = NSTemporaryDirectory() + "git-watch-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try await git(["init", "-q"], in: root)
        return root
    }

    func write(_ text: String, _ path: String) throws {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try TestFile.write(path, text.utf8)
    }

    @Test func trackedChangesMatchGitDiffHead() async throws {
        let root = try await Self.makeRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try write("one\ntwo\nthree\nfour\nfive\nsix\nseven\n", root + "/a.txt")
        try write("keep\n", root + "/b.txt")
        try write("gone\n", root + "/c.txt")
        try write("crlf\r\nline\r\n", root + "/d.txt")
        try await Self.git(["add", "."], in: root)
        try await Self.git(["commit", "-q", "-m", "init"], in: root)
        try await Self.git(["remote", "add", "origin", "https://example.invalid/repo.git"], in: root)
        // Unstaged, staged and deleted changes.
        try write("one\nTWO\nthree\nfour\nfive\nsix\nseven\neight\n", root + "/a.txt")
        try write("keep\nstaged\n", root + "/b.txt")
        try await Self.git(["add", "b.txt"], in: root)
        try FileManager.default.removeItem(atPath: root + "/c.txt")
        try write("crlf\r\nLINE\r\n", root + "/d.txt")

        let snapshot = try GitSnapshotter.snapshot(root: root)
        let expected = try await Self.git(["diff", "HEAD"], in: root)
        #expect(expected.contains("-gone") && expected.contains("+TWO") && expected.contains("+staged"), "git saw the changes")
        #expect(snapshot.unifiedDiff == expected)
        #expect(snapshot.branch == "main")
        #expect(snapshot.remoteOrigin == "https://example.invalid/repo.git")
        #expect(!snapshot.diffTruncated)
        // git itself accepts it: reversed, it applies to the working tree.
        let patch = root + "/../" + UUID().uuidString + ".patch"
        try TestFile.write(patch, snapshot.unifiedDiff.utf8)
        defer { try? FileManager.default.removeItem(atPath: patch) }
        let check = try await Self.git(["apply", "--check", "-R", "-v", patch], in: root)
        #expect(!check.contains("error"))
        #expect(
            GitSnapshotter.repositoryRoot(containing: root + "/a.txt").map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path }
                == URL(fileURLWithPath: root).resolvingSymlinksInPath().path)
    }

    @Test func untrackedFilesAppearAsNewFilesAndIgnoredOnesDoNot() async throws {
        let root = try await Self.makeRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try write("*.log\n!keep.log\n", root + "/.gitignore")
        try await Self.git(["add", "."], in: root)
        try await Self.git(["commit", "-q", "-m", "init"], in: root)
        try write("new file\n", root + "/dir/new.txt")
        try write("ignored\n", root + "/noise.log")
        try write("kept\n", root + "/keep.log")
        let snapshot = try GitSnapshotter.snapshot(root: root)
        #expect(snapshot.unifiedDiff.contains("diff --git a/dir/new.txt b/dir/new.txt\nnew file mode 100644"))
        #expect(snapshot.unifiedDiff.contains("+new file"))
        #expect(snapshot.unifiedDiff.contains("keep.log"), "a negated ignore rule keeps the file")
        #expect(!snapshot.unifiedDiff.contains("noise.log"))
    }

    @Test func unbornAndDetachedHeads() async throws {
        let root = try await Self.makeRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try write("first\n", root + "/f.txt")
        let unborn = try GitSnapshotter.snapshot(root: root)
        #expect(unborn.branch == "main")
        #expect(unborn.unifiedDiff.contains("+first"))
        try await Self.git(["add", "."], in: root)
        try await Self.git(["commit", "-q", "-m", "one"], in: root)
        try await Self.git(["checkout", "-q", "--detach"], in: root)
        #expect(try GitSnapshotter.snapshot(root: root).branch == "")
    }

    /// A HEAD that cannot be read fails the snapshot (nothing is sent for the repository);
    /// it was taken for an unborn branch, and every committed file came out as added.
    @Test func aCorruptHeadIsAnErrorNotAnUnbornBranch() async throws {
        let root = try await Self.makeRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try write("committed\n", root + "/a.txt")
        try await Self.git(["add", "."], in: root)
        try await Self.git(["commit", "-q", "-m", "init"], in: root)
        try TestFile.write(root + "/.git/HEAD", "garbage\n".utf8)
        #expect(throws: GitError.self) { try GitSnapshotter.snapshot(root: root) }
    }

    @Test func theDiffIsCutAtAFileBoundary() async throws {
        let root = try await Self.makeRepository()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try write("x\n", root + "/seed.txt")
        try await Self.git(["add", "."], in: root)
        try await Self.git(["commit", "-q", "-m", "init"], in: root)
        let line = String(repeating: "y", count: 99) + "\n"
        for index in 0..<100 { try write(String(repeating: line, count: 500), root + String(format: "/big-%03d.txt", index)) }
        let snapshot = try GitSnapshotter.snapshot(root: root)
        #expect(snapshot.diffTruncated)
        #expect(snapshot.unifiedDiff.utf8.count <= GitSnapshotter.maxDiffBytes)
        #expect(snapshot.unifiedDiff.hasSuffix("\n"))
        #expect(!snapshot.unifiedDiff.isEmpty)
    }
}
