import AgentSystem
#if canImport(Glibc)
import Glibc
#endif

/// Where the statter reads `/proc` and `/sys` (absolute, clean paths as the reference names
/// them): the machine, a fixture tree (tests, `stat --stat-root`) or memory (fuzzing).
public protocol HostFileSystem: Sendable {
    /// The file's bytes, at most ``HostFiles/maxFileBytes`` of them (more is cut).
    func read(_ path: String) -> Result<[UInt8], FileError>
    /// Whether something exists at `path` (afero's `Exists`: only "no such file" is false).
    func exists(_ path: String) -> Result<Bool, FileError>
    /// Whether `path` is a cgroup v2 mount (`statfs` type `0x63677270` on the machine).
    func isCgroup2(_ path: String) -> Bool
}

/// Bounds of the statter's reads.
public enum HostFiles {
    /// Largest file read, as prometheus/procfs reads `/proc/stat`: one file at a time, so
    /// a reading holds at most this much.
    public static let maxFileBytes = 1 << 20
}

/// A failed open, read or stat, as Go's `*PathError` prints it (`open /x: no such file or directory`).
public struct FileError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The call: `open`, `read` or `stat`.
    public let operation: String
    /// The path as the reference names it (never a fixture root's).
    public let path: String
    public let errno: Int32

    public init(operation: String, path: String, errno: Int32) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    public var description: String { "\(operation) \(path): \(SystemCallError.message(errno))" }

    /// Go's `errors.Is(err, fs.ErrNotExist)`.
    public var notExist: Bool { errno == ENOENT }
}
