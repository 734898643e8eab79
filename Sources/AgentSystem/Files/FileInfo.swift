#if canImport(Glibc)
import Glibc
#endif

/// What `lstat`/`fstat` say about a file, for modules where `struct stat`'s members are not
/// visible (MemberImportVisibility attributes them to CDispatch there).
public struct FileInfo: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case regular, directory, symbolicLink, other
    }

    public var kind: Kind
    /// The permission bits (`st_mode & 0o7777`).
    public var permissions: UInt32
    public var size: Int
    /// Bytes allocated on disk (`st_blocks` × 512).
    public var allocatedBytes: Int
    /// Modification time, nanoseconds since the epoch.
    public var modifiedNanoseconds: Int64
    /// The owner's user ID.
    public var owner: UInt32

    init(_ st: stat) {
        switch st.st_mode & S_IFMT {
        case S_IFREG: kind = .regular
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symbolicLink
        default: kind = .other
        }
        permissions = UInt32(st.st_mode & 0o7777)
        size = Int(st.st_size)
        allocatedBytes = Int(st.st_blocks) * 512
        modifiedNanoseconds = Int64(st.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_mtim.tv_nsec)
        owner = UInt32(st.st_uid)
    }

    /// `lstat(2)`: links are not followed; nil when it fails.
    public static func of(path: String) -> FileInfo? {
        var st = stat()
        return lstat(path, &st) == 0 ? FileInfo(st) : nil
    }

    /// `stat(2)`: links are followed; nil when it fails.
    public static func following(path: String) -> FileInfo? {
        var st = stat()
        return stat(path, &st) == 0 ? FileInfo(st) : nil
    }

    /// `fstat(2)`; nil when it fails.
    public static func of(descriptor: Int32) -> FileInfo? {
        var st = stat()
        return fstat(descriptor, &st) == 0 ? FileInfo(st) : nil
    }

    /// `fstatat(2)` of `name` in the directory open as `directory`, links not followed;
    /// nil when it fails.
    public static func of(name: String, inDirectory directory: Int32) -> FileInfo? {
        var st = stat()
        return fstatat(directory, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? FileInfo(st) : nil
    }
}
