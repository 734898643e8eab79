import Glibc

/// What `lstat` says of a path, for fingerprints: size, modification and change times (ns),
/// inode and mode; `[-1]` when it is missing. (Kept apart from the libgit2 files: their C
/// headers hide Glibc's `stat` fields from Swift's member lookup.)
enum FileStamp {
    static func of(_ path: String) -> [Int] {
        var info = stat()
        guard lstat(path, &info) == 0 else { return [-1] }
        return [
            Int(info.st_size), Int(info.st_mtim.tv_sec), Int(info.st_mtim.tv_nsec), Int(info.st_ctim.tv_sec),
            Int(info.st_ctim.tv_nsec), Int(bitPattern: UInt(info.st_ino)), Int(info.st_mode),
        ]
    }
}
