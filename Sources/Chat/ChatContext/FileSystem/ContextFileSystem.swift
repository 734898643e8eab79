/// What one path is, as `lstat` (``ContextFileSystem/linkStatus(_:)``) or `stat`
/// (``ContextFileSystem/status(_:)``) says.
public struct ContextFileStatus: Sendable, Equatable {
    public enum Kind: Sendable, Equatable { case regular, directory, symbolicLink, other }
    public var kind: Kind
    public var size: UInt64
    /// What tells the resolver the file is unchanged since it last read it; nil when the file
    /// system cannot say (the file is then read on every resolve).
    public var stamp: ContextFileStamp?

    public init(kind: Kind, size: UInt64, stamp: ContextFileStamp? = nil) {
        self.kind = kind
        self.size = size
        self.stamp = stamp
    }
}

/// A file's identity and times, which move whenever its content can have changed: device,
/// inode, size, and the modification and status-change times. The change time cannot be set
/// from user space, so a same-size rewrite whose times were put back (`cp -p`, `touch -r`)
/// still differs.
public struct ContextFileStamp: Sendable, Hashable {
    public var device: UInt64
    public var inode: UInt64
    public var size: UInt64
    /// `st_mtim`, nanoseconds since the epoch.
    public var modifiedNanoseconds: Int64
    /// `st_ctim`, nanoseconds since the epoch.
    public var changedNanoseconds: Int64

    public init(device: UInt64, inode: UInt64, size: UInt64, modifiedNanoseconds: Int64, changedNanoseconds: Int64) {
        self.device = device
        self.inode = inode
        self.size = size
        self.modifiedNanoseconds = modifiedNanoseconds
        self.changedNanoseconds = changedNanoseconds
    }
}

/// One name in a directory, and whether the entry itself (not what a link points to) is a
/// directory.
public struct ContextDirectoryEntry: Sendable, Equatable {
    public var name: String
    public var isDirectory: Bool

    public init(name: String, isDirectory: Bool) {
        self.name = name
        self.isDirectory = isDirectory
    }
}

/// A file-system error: the call, and the C error's text.
public struct ContextFileSystemError: Error, Sendable, Equatable, CustomStringConvertible {
    public var operation: String
    public var path: String
    public var code: Int32
    public var message: String

    public init(operation: String, path: String, code: Int32, message: String) {
        self.operation = operation
        self.path = path
        self.code = code
        self.message = message
    }

    /// As Go's `*PathError` prints: `<op> <path>: <message>`.
    public var description: String { "\(operation) \(path): \(message)" }
}

/// The file-system calls the resolver makes: all of them synchronous and bounded, so that a
/// resolve is a plain function of what they answer (``PosixContextFileSystem`` is the real
/// one; a test can answer from memory).
public protocol ContextFileSystem: Sendable {
    /// `lstat(2)`: nil when the path does not exist or cannot be examined.
    func linkStatus(_ path: String) -> ContextFileStatus?
    /// `stat(2)` (links followed).
    func status(_ path: String) -> ContextFileStatus?
    /// `realpath(3)`: every link resolved, absolute and clean. A loop fails with ELOOP after
    /// the kernel's 40 links.
    func canonicalPath(_ path: String) throws(ContextFileSystemError) -> String
    /// At most `limit` entries of a directory (without `.` and `..`), sorted by name
    /// bytewise, and whether there were more; nil when it cannot be opened.
    func directoryEntries(_ path: String, limit: Int) -> (entries: [ContextDirectoryEntry], truncated: Bool)?
    /// At most `limit` bytes from the start of a file (links followed).
    func read(_ path: String, limit: Int) throws(ContextFileSystemError) -> [UInt8]
}
