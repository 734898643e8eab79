import AgentSystem
import CHostStats
#if canImport(Glibc)
import Glibc
#endif

/// A file system's size and use in bytes, from `statfs`.
public struct DiskUsage: Equatable, Sendable {
    public var total: Double
    public var used: Double

    /// From `statfs`'s counts as clistat computes them: blocks × size, and (blocks − free)
    /// × size in unsigned 64-bit arithmetic (which wraps as Go's does).
    public init(blocks: UInt64, freeBlocks: UInt64, blockSize: Int64) {
        total = Double(blocks &* UInt64(bitPattern: blockSize))
        used = Double(blocks &- freeBlocks) * Double(blockSize)
    }

    /// `statfs(path)`, or its errno. Blocks the calling thread for as long as the file
    /// system does not answer (on a dead hard-mounted NFS server, until it is back, and
    /// nothing can cancel it). The agent's resource monitor calls it through
    /// ``VolumeReads``, off Swift's cooperative threads; `coder stat` may simply wait.
    @Sendable public static func of(_ path: String) -> Result<DiskUsage, DiskError> {
        // Go refuses a path holding NUL before the call.
        guard !path.utf8.contains(0) else { return .failure(DiskError(errno: EINVAL)) }
        var info = host_stats_fs()
        guard host_stats_statfs(path, &info) == 0 else { return .failure(DiskError(errno: errno)) }
        return .success(DiskUsage(blocks: info.blocks, freeBlocks: info.free_blocks, blockSize: info.block_size))
    }
}

/// A failed `statfs`: `not found` is what `stat disk` turns into `not found: "<path>"`.
public struct DiskError: Error, Equatable, Sendable, CustomStringConvertible {
    public let errno: Int32

    public init(errno: Int32) {
        self.errno = errno
    }

    public var notFound: Bool { errno == ENOENT }

    /// Go's `syscall.Errno` text (`permission denied`).
    public var description: String { SystemCallError.message(errno) }
}
