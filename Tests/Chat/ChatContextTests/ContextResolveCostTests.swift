import AgentCore
import AgentTestSupport
@testable import ChatContext
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A resolve costs what changed: a kept resolver reads only the files whose
/// stamp moved, and still sees every change, removal and addition.
struct ContextResolveCostTests {
    /// ``PosixContextFileSystem`` recording the path of every read.
    final class CountingFileSystem: ContextFileSystem {
        let base = PosixContextFileSystem()
        let reads = Mutex<[String]>([])

        func linkStatus(_ path: String) -> ContextFileStatus? { base.linkStatus(path) }
        func status(_ path: String) -> ContextFileStatus? { base.status(path) }
        func canonicalPath(_ path: String) throws(ContextFileSystemError) -> String { try base.canonicalPath(path) }
        func directoryEntries(_ path: String, limit: Int) -> (entries: [ContextDirectoryEntry], truncated: Bool)? {
            base.directoryEntries(path, limit: limit)
        }
        func read(_ path: String, limit: Int) throws(ContextFileSystemError) -> [UInt8] {
            reads.withLock { $0.append(path) }
            return try base.read(path, limit: limit)
        }

        /// The paths read since the last call.
        func take() -> [String] {
            reads.withLock { reads in
                defer { reads = [] }
                return reads
            }
        }
    }

    /// A tree of `skills` skills, an AGENTS.md and an .mcp.json, and a resolver over it.
    struct Fixture {
        let tree: TempTree
        let fs = CountingFileSystem()
        let resolver: ContextResolver
        let roots: [ContextScanRoot]

        init(skills: Int = 20) throws {
            tree = try TempTree()
            for number in 0..<skills { try tree.write(Self.skillPath(number), TempTree.skill(Self.name(number))) }
            try tree.write("AGENTS.md", "# Rules\n")
            try tree.write(".mcp.json", #"{"mcpServers": {"a": {"command": "x"}}}"#)
            resolver = ContextResolver(fileSystem: fs)
            roots = [ContextScanRoot(path: tree.root)]
        }

        static func name(_ number: Int) -> String { String(format: "s-%03d", number) }
        static func skillPath(_ number: Int) -> String { ".agents/skills/\(name(number))/SKILL.md" }

        func resolve() -> ContextSnapshot { resolver.resolve(roots: roots) }

        /// Resolves until a resolve reads nothing: files written a moment ago are read again
        /// until their change time is older than the clock's granularity. False when it still
        /// reads after 5 s (every resolve reads every file).
        func settle() -> Bool {
            let deadline = ContinuousClock.now + .seconds(5)
            while ContinuousClock.now < deadline {
                _ = resolve()
                if fs.take().isEmpty { return true }
                usleep(20_000)
            }
            return false
        }

        func skill(_ snapshot: ContextSnapshot, _ number: Int) -> ContextResource? {
            snapshot.resources.first { $0.id == "skill:\(tree.path(".agents/skills/\(Self.name(number))"))" }
        }
    }

    /// `touch`: times set to now, content unchanged.
    static func touch(_ path: String) {
        #expect(utimensat(AT_FDCWD, path, nil, 0) == 0)
    }

    /// The access and modification times of `path`.
    static func times(_ path: String) -> [timespec] {
        var info = stat()
        _ = stat(path, &info)
        return [info.st_atim, info.st_mtim]
    }

    /// Fails before the cache: every resolve read all 22 files (and again the payloads kept).
    @Test func aTouchedFileIsTheOnlyOneRead() throws {
        let fixture = try Fixture()
        let first = fixture.resolve()
        #expect(Set(fixture.fs.take()).count == 22)
        try #require(fixture.settle(), "an unchanged tree is read again on every resolve")
        let touched = fixture.tree.path(Fixture.skillPath(7))
        Self.touch(touched)
        let second = fixture.resolve()
        #expect(Set(fixture.fs.take()) == [touched])
        #expect(second == first, "the same content: the same snapshot")
        // Touched a moment ago, it may be read again until its time is older than the clock's tick; nothing else is.
        _ = fixture.resolve()
        #expect(Set(fixture.fs.take()).isSubset(of: [touched]))
    }

    /// A same-size rewrite whose times are put back (`cp -p`, `touch -r`), in place or by
    /// rename, is still read: the change time (and the inode) moved.
    @Test func aSameSizeRewriteWithItsTimesRestoredIsSeen() throws {
        let fixture = try Fixture(skills: 3)
        _ = fixture.settle()
        let path = fixture.tree.path(Fixture.skillPath(1))
        var old = Self.times(path)
        // "Does things." was there: the same size.
        try TestFile.write(path, Array(TempTree.skill(Fixture.name(1), description: "Ends things.").utf8))
        #expect(utimensat(AT_FDCWD, path, &old, 0) == 0)
        let inPlace = fixture.resolve()
        #expect(fixture.skill(inPlace, 1)?.description == "Ends things.")
        #expect(fixture.fs.take().contains(path))

        _ = fixture.settle()
        var before = Self.times(path)
        let renamed = fixture.tree.path("renamed.tmp")
        try TestFile.write(renamed, Array(TempTree.skill(Fixture.name(1), description: "Adds things.").utf8))
        #expect(utimensat(AT_FDCWD, renamed, &before, 0) == 0)
        #expect(rename(renamed, path) == 0)
        let byRename = fixture.resolve()
        #expect(fixture.skill(byRename, 1)?.description == "Adds things.")
        #expect(fixture.fs.take().contains(path))
    }

    /// What changed, went or came is in the next snapshot, as a resolver of its own sees it.
    @Test func changesRemovalsAndAdditionsAreSeen() throws {
        let fixture = try Fixture(skills: 4)
        _ = fixture.settle()
        try fixture.tree.write(Fixture.skillPath(0), TempTree.skill(Fixture.name(0), description: "Now a longer description."))
        try FileManager.default.removeItem(atPath: fixture.tree.path(".agents/skills/\(Fixture.name(2))"))
        try fixture.tree.write(Fixture.skillPath(9), TempTree.skill(Fixture.name(9)))
        try fixture.tree.write(Fixture.skillPath(3), TempTree.skill("mismatch"))
        try fixture.tree.write("AGENTS.md", "# New rules\n")
        try fixture.tree.write(".mcp.json", "not json")
        let snapshot = fixture.resolve()
        #expect(snapshot == ContextResolver().resolve(roots: fixture.roots))
        #expect(fixture.skill(snapshot, 0)?.description == "Now a longer description.")
        #expect(fixture.skill(snapshot, 2) == nil)
        #expect(fixture.skill(snapshot, 9)?.status == .ok)
        #expect(fixture.skill(snapshot, 3)?.status == .invalid)
        let agents = snapshot.resources.first { $0.kind == .instructionFile }
        #expect(agents?.description == "New rules" && agents?.payload == Array("# New rules\n".utf8))
        #expect(snapshot.resources.first { $0.kind == .mcpConfig }?.status == .invalid)
        // Put back: the first content again, and the same snapshot as the first resolve's.
        try FileManager.default.removeItem(atPath: fixture.tree.path(".agents/skills/\(Fixture.name(9))"))
        #expect(fixture.resolve() == ContextResolver().resolve(roots: fixture.roots))
    }

    /// ``PosixContextFileSystem`` whose stamps say the file changed just now (and never
    /// change): a file written within one tick of the clock its times come from.
    final class FreshStampFileSystem: ContextFileSystem {
        let base = PosixContextFileSystem()
        let changed = ContextFileCache.now()

        func fresh(_ status: ContextFileStatus?) -> ContextFileStatus? {
            guard var status, let stamp = status.stamp else { return status }
            status.stamp = ContextFileStamp(
                device: stamp.device, inode: stamp.inode, size: stamp.size, modifiedNanoseconds: changed, changedNanoseconds: changed)
            return status
        }

        func linkStatus(_ path: String) -> ContextFileStatus? { fresh(base.linkStatus(path)) }
        func status(_ path: String) -> ContextFileStatus? { fresh(base.status(path)) }
        func canonicalPath(_ path: String) throws(ContextFileSystemError) -> String { try base.canonicalPath(path) }
        func directoryEntries(_ path: String, limit: Int) -> (entries: [ContextDirectoryEntry], truncated: Bool)? {
            base.directoryEntries(path, limit: limit)
        }
        func read(_ path: String, limit: Int) throws(ContextFileSystemError) -> [UInt8] { try base.read(path, limit: limit) }
    }

    /// A same-size write in the tick of the file's last change leaves its stamp as it was:
    /// so a file whose change is not older than the tick is read again, and the write is seen.
    @Test func aChangeWithinTheClocksTickIsReadAgain() throws {
        let tree = try TempTree()
        try tree.write("skills/one/SKILL.md", TempTree.skill("one"))
        let resolver = ContextResolver(fileSystem: FreshStampFileSystem())
        let roots = [ContextScanRoot(path: tree.root)]
        #expect(resolver.resolve(roots: roots).resources.first?.description == "Does things.")
        #expect(resolver.cache.current.values.allSatisfy { !$0.settled })
        try tree.write("skills/one/SKILL.md", TempTree.skill("one", description: "Did things."))
        #expect(resolver.resolve(roots: roots).resources.first?.description == "Did things.")

        let now = ContextFileCache.now()
        func stamp(_ nanoseconds: Int64) -> ContextFileStamp {
            ContextFileStamp(device: 1, inode: 2, size: 3, modifiedNanoseconds: nanoseconds, changedNanoseconds: nanoseconds)
        }
        #expect(ContextFileCache.isSettled(stamp(now - 60_000_001), at: now))
        #expect(!ContextFileCache.isSettled(stamp(now - 10_000_001), at: now))
        // Whole seconds: a file system that keeps no more; two of them.
        let second = now / 1_000_000_000 * 1_000_000_000
        #expect(!ContextFileCache.isSettled(stamp(second - 1_000_000_000), at: second + 500_000_000))
        #expect(ContextFileCache.isSettled(stamp(second - 2_000_000_000), at: second + 500_000_000))
    }

    /// The cache holds the files the last resolve examined, and the payloads of its snapshot only.
    @Test func theCacheHoldsTheLastResolveOnly() throws {
        let fixture = try Fixture(skills: 6)
        _ = fixture.resolve()
        #expect(fixture.resolver.cache.current.count == 8)
        #expect(fixture.resolver.cache.current.values.filter { $0.payload != nil }.count == 7, "six skills and AGENTS.md")
        for number in 0..<3 { try FileManager.default.removeItem(atPath: fixture.tree.path(".agents/skills/\(Fixture.name(number))")) }
        _ = fixture.resolve()
        #expect(fixture.resolver.cache.current.count == 5)
        // A resolver with a cap of two resources: the cache keeps the two payloads sent.
        var limits = ContextLimits()
        limits.resources = 2
        let capped = ContextResolver(limits: limits)
        let snapshot = capped.resolve(roots: fixture.roots)
        #expect(snapshot.resources.filter { !$0.payload.isEmpty }.count == 2)
        #expect(capped.cache.current.count == 5)
        #expect(capped.cache.current.values.compactMap(\.payload).count == 2)
    }
}

/// `GET /context-config`'s skills read at most 1 000 skill files however many are there and
/// whether or not they are listed: mismatched ones had each cost a read and a parse, up to
/// the directory's 65 536 entries, on every request.
struct LegacyContextConfigCostTests {
    @Test func skillFilesExaminedAreBounded() throws {
        let tree = try TempTree()
        for number in 0..<(LegacyContextConfig.maxExaminedSkills + 200) {
            // The front matter names another skill: never listed, still read.
            _ = try tree.write(".agents/skills/d\(number)/SKILL.md", TempTree.skill("other"))
        }
        let fs = ContextResolveCostTests.CountingFileSystem()
        var config = LegacyContextConfig(
            configuration: .init(instructionsDirs: [], skillsDirs: [".agents/skills"]), home: tree.root, workingDirectory: tree.root)
        config.fileSystem = fs
        #expect(config.skillParts().isEmpty)
        #expect(fs.take().count == LegacyContextConfig.maxExaminedSkills)
    }
}
