import AgentCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What the last resolve learnt of each file it read, so that the next one reads, hashes and
/// parses only the files whose ``ContextFileStamp`` moved (1 000 large skills made
/// every resolve read and parse 63 MiB).
///
/// Bounded by the last resolve: one entry per file it examined (at most
/// ``ContextLimits/examinedFiles``), each holding what that file's resource holds, and the
/// payloads of its snapshot only (at most ``ContextLimits/snapshotBytes``, shared with it).
/// Files no longer seen are forgotten at the next resolve.
final class ContextFileCache: Sendable {
    /// A file as one kind reads it (the same file can be a skill through one name and an
    /// instruction file through another).
    struct Key: Hashable, Sendable {
        var kind: ContextResourceKind
        /// The file read: a link's target, else the path itself.
        var path: String
    }

    /// What a file's bytes said when they were read.
    enum Content: Sendable {
        /// Over the per-file cap: its size and the hash of the first cap bytes.
        case oversize(size: UInt64, hash: [UInt8])
        /// Read whole: its size, hash and what its kind's checks found.
        case read(size: UInt64, hash: [UInt8], facts: Facts)
    }

    /// The kind's checks of a whole file.
    enum Facts: Sendable {
        case instruction(firstLine: String)
        case skill(Result<SkillFrontMatter, SkillFrontMatter.ParseError>)
        case mcpConfig(Result<[MCPConfigEntryError], MCPConfigFileError>)
    }

    struct Entry: Sendable {
        var stamp: ContextFileStamp
        /// Whether any write after the read moves the stamp (see ``isSettled(_:at:)``); an
        /// entry that is not is used within its own resolve only.
        var settled: Bool
        var content: Content
        /// The bytes, once loaded as a payload of the last snapshot.
        var payload: [UInt8]?
    }

    private let entries = Mutex<[Key: Entry]>([:])

    init() {}

    /// The entries the last resolve left (a copy: resolves may overlap, each starts from the
    /// last one stored and a stale entry only costs a read).
    var current: [Key: Entry] { entries.withLock { $0 } }

    func store(_ next: [Key: Entry]) { entries.withLock { $0 = next } }

    /// How old a change must be, at the start of a resolve, to be trusted later: the
    /// kernel stamps files from a clock that ticks every jiffy (at most 10 ms), or on file
    /// systems that keep whole seconds (ext4's small inodes, FAT's two) every second or two.
    static let fineMargin: Int64 = 50_000_000
    static let coarseMargin: Int64 = 2_000_000_000

    /// Whether a write after a resolve that started at `start` (ns since the epoch) and read
    /// a file with `stamp` must move the stamp: its times are older than one tick of the
    /// clock that stamped them. Else a same-size write in the same tick (an editor saving
    /// twice) would leave the stamp as it was, and the entry stale.
    static func isSettled(_ stamp: ContextFileStamp, at start: Int64) -> Bool {
        let coarse = stamp.changedNanoseconds % 1_000_000_000 == 0 || stamp.modifiedNanoseconds % 1_000_000_000 == 0
        let newest = max(stamp.changedNanoseconds, stamp.modifiedNanoseconds)
        return newest < start - (coarse ? coarseMargin : fineMargin)
    }

    /// The wall clock in nanoseconds since the epoch (file times are on it).
    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
    }
}
