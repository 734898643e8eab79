import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `POST /move-file` where `rename` alone does not make a move: between file systems
/// (EXDEV, a 500 before: `/tmp` on tmpfs and the workspace on a volume is the common
/// case), onto another hard link of the same file (rename succeeds and changes nothing,
/// so the source stayed while the reply said moved), and a file's destination named as a
/// directory (ENOTDIR, a 500 before).
@Suite(.serialized)
struct MoveFileTests {
    static func move(_ h: FilesHarness, _ source: String, _ destination: String, overwrite: Bool = false) async throws -> RawHTTPClient.Response {
        try await h.post("move-file", json: "{\"source\":\"\(source)\",\"dest\":\"\(destination)\",\"overwrite\":\(overwrite)}")
    }

    static func bytes(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map { [UInt8]($0) } }

    static func mode(_ path: String) -> (mode: mode_t, mtime: Int)? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return (info.st_mode, info.st_mtim.tv_sec)
    }

    /// Whether `/dev/shm` (tmpfs on Debian) is writable and on another file system than the
    /// suite's temporary directories.
    static let hasOtherFileSystem: Bool = {
        var here = stat()
        var there = stat()
        return stat(NSTemporaryDirectory(), &here) == 0 && stat("/dev/shm", &there) == 0 && here.st_dev != there.st_dev
            && access("/dev/shm", W_OK) == 0
    }()

    @Test(.enabled(if: hasOtherFileSystem, "/dev/shm is not a writable, separate file system here"))
    func aFileAndALinkMoveBetweenFileSystems() async throws {
        try await withFilesServer { h in
            let other = "/dev/shm/agent-move-" + UUID().uuidString.prefix(8)
            #expect(mkdir(other, 0o755) == 0)
            defer { try? FileManager.default.removeItem(atPath: other) }
            let content = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            try TestFile.write(other + "/big.bin", content)
            #expect(chmod(other + "/big.bin", 0o751) == 0)
            var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, other + "/big.bin", &times, 0) == 0)
            let moved = try await Self.move(h, other + "/big.bin", h.file("big.bin"))
            #expect(moved.status == 200, "\(moved.bodyText)")
            #expect(access(other + "/big.bin", F_OK) != 0, "the source is gone")
            #expect(Self.bytes(h.file("big.bin")) == content)
            let kept = try #require(Self.mode(h.file("big.bin")))
            #expect(kept.mode & 0o7777 == 0o751 && kept.mtime == 1_000_000_000, "mode and time kept")
            // No temporary file is left beside it.
            #expect(try FileManager.default.contentsOfDirectory(atPath: h.directory).filter { $0.contains(".tmp.") }.isEmpty)

            // A symbolic link moves as a link.
            #expect(symlink("some/target", other + "/link") == 0)
            #expect(try await Self.move(h, other + "/link", h.file("link")).status == 200)
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: h.file("link")) == "some/target")
            #expect(access(other + "/link", F_OK) != 0 && Self.mode(other + "/link") == nil)

            // Overwrite is still needed, and a directory is refused with a reason, both
            // leaving everything as it was.
            try TestFile.write(other + "/again.bin", [1, 2, 3])
            #expect(try await Self.move(h, other + "/again.bin", h.file("big.bin")).status == 409)
            #expect(try await Self.move(h, other + "/again.bin", h.file("big.bin"), overwrite: true).status == 200)
            #expect(Self.bytes(h.file("big.bin")) == [1, 2, 3])
            #expect(mkdir(other + "/tree", 0o755) == 0)
            let tree = try await Self.move(h, other + "/tree", h.file("tree"))
            #expect(tree.status == 400 && tree.bodyText.contains("cross-device"), "\(tree.bodyText)")
            #expect(access(other + "/tree", F_OK) == 0 && access(h.file("tree"), F_OK) != 0)
        }
    }

    @Test func ontoAnotherHardLinkOfTheSameFileTheSourceNameGoes() async throws {
        try await withFilesServer { h in
            try TestFile.write(h.file("a"), Array("same".utf8))
            #expect(link(h.file("a"), h.file("b")) == 0)
            #expect(try await Self.move(h, h.file("a"), h.file("b")).status == 409)
            let moved = try await Self.move(h, h.file("a"), h.file("b"), overwrite: true)
            #expect(moved.status == 200, "\(moved.bodyText)")
            #expect(access(h.file("a"), F_OK) != 0, "the source's name is gone")
            #expect(Self.bytes(h.file("b")) == Array("same".utf8))

            // One name reached two ways (a linked parent) is not two names: nothing goes.
            #expect(mkdir(h.file("dir"), 0o755) == 0)
            try TestFile.write(h.file("dir/only"), Array("keep".utf8))
            #expect(symlink(h.file("dir"), h.file("alias")) == 0)
            #expect(try await Self.move(h, h.file("alias/only"), h.file("dir/only"), overwrite: true).status == 200)
            #expect(Self.bytes(h.file("dir/only")) == Array("keep".utf8))
            #expect(try await Self.move(h, h.file("dir/only"), h.file("dir/only"), overwrite: true).status == 200)
            #expect(Self.bytes(h.file("dir/only")) == Array("keep".utf8))
        }
    }

    @Test func aFilesDestinationNamedAsADirectoryIsTheClientsError() async throws {
        try await withFilesServer { h in
            try TestFile.write(h.file("f"), [1])
            let slash = try await Self.move(h, h.file("f"), h.file("new/"))
            #expect(slash.status == 400, "\(slash.bodyText)")
            let underFile = try await Self.move(h, h.file("f"), h.file("f/inside"))
            #expect(underFile.status == 400, "\(underFile.bodyText)")
            #expect(Self.bytes(h.file("f")) == [1])
        }
    }
}
