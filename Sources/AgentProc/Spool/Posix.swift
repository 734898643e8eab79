import AgentCore
import Synchronization
import Glibc

/// Thin wrappers over the few system calls the spool needs, so that every open uses
/// `O_NOFOLLOW | O_CLOEXEC`, every created file/dir is 0600/0700, and EINTR is retried
/// in one place.
enum Posix {
    static let fileMode: mode_t = 0o600
    static let dirMode: mode_t = 0o700

    /// Opens an existing regular file for reading (never follows a symlink).
    /// A regular file only, opened without blocking: a FIFO put at a spool's path (the
    /// cursor, a segment) would block the open until a writer came, at start under the store's
    /// lock. -1 (errno `EINVAL`) for anything but a regular file.
    static func openRead(_ path: String) -> Int32 {
        let fd = retryEINTR { open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) }
        guard fd >= 0 else { return fd }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            errno = EINVAL
            return -1
        }
        return fd
    }

    /// Opens an existing file for writing in place (no truncation: recycling keeps the blocks).
    static func openWrite(_ path: String) -> Int32 {
        retryEINTR { open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC) }
    }

    /// Creates (or truncates) a file 0600 for writing.
    static func create(_ path: String, exclusive: Bool = false, readWrite: Bool = false) -> Int32 {
        let flags =
            (readWrite ? O_RDWR : O_WRONLY) | O_CREAT | O_NOFOLLOW | O_CLOEXEC
            | (exclusive ? O_EXCL : O_TRUNC)
        return retryEINTR { open(path, flags, fileMode) }
    }

    static func retryEINTR(_ body: () -> Int32) -> Int32 {
        while true {
            let r = body()
            if r >= 0 || errno != EINTR { return r }
        }
    }

    /// Writes all of `count` bytes at `offset`; returns false (errno set) on any failure or short write.
    static func pwriteAll(_ fd: Int32, _ base: UnsafeRawPointer, _ count: Int, _ offset: Int) -> Bool {
        var done = 0
        while done < count {
            let n = pwrite(fd, base + done, count - done, off_t(offset + done))
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            if n == 0 { errno = EIO; return false }
            done += n
        }
        return true
    }

    /// Reads exactly `count` bytes at `offset`; false on error or end of file.
    static func preadAll(_ fd: Int32, _ base: UnsafeMutableRawPointer, _ count: Int, _ offset: Int) -> Bool {
        var done = 0
        while done < count {
            let n = pread(fd, base + done, count - done, off_t(offset + done))
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            if n == 0 { return false }
            done += n
        }
        return true
    }

    /// `lstat` (never follows symlinks); nil if it fails.
    static func lstatInfo(_ path: String) -> FileInfo? {
        FileInfo.of(path: path)
    }

    static func isRegular(_ st: FileInfo) -> Bool { st.kind == .regular }
    static func isDirectory(_ st: FileInfo) -> Bool { st.kind == .directory }

    /// Names in a directory (without "." and ".."); empty if it cannot be opened.
    static func listDirectory(_ path: String) -> [String] {
        let fd = retryEINTR { open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0, let dir = fdopendir(fd) else {
            if fd >= 0 { close(fd) }
            return []
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// `mkdir -p` with mode 0700 for the directories it creates.
    static func makeDirectories(_ path: String) throws(SpoolError) {
        if let st = lstatInfo(path) {
            if isDirectory(st) { return }
            throw .system(call: "mkdir", path: path, errno: ENOTDIR)
        }
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            try makeDirectories(String(path[..<slash]))
        }
        if mkdir(path, dirMode) != 0 && errno != EEXIST {
            throw .system(call: "mkdir", path: path, errno: errno)
        }
    }

    /// 16 lowercase hex digits: the file name of the segment starting at `offset`.
    static func segmentName(_ offset: UInt64) -> String {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var out = [UInt8](repeating: 0, count: 16)
        var v = offset
        for i in stride(from: 15, through: 0, by: -1) {
            out[i] = digits[Int(v & 0xf)]
            v >>= 4
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Inverse of `segmentName`; nil unless exactly 16 lowercase hex digits.
    static func parseSegmentName(_ name: String) -> UInt64? {
        let utf8 = name.utf8
        guard utf8.count == 16 else { return nil }
        var v: UInt64 = 0
        for c in utf8 {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = v << 4 | UInt64(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = v << 4 | UInt64(c - UInt8(ascii: "a") + 10)
            default: return nil
            }
        }
        return v
    }

    /// Spool ids are `[0-9a-f-]{1,64}`: safe as a single path component, never "." or "..".
    static func isValidID(_ id: String) -> Bool {
        let utf8 = id.utf8
        guard (1...64).contains(utf8.count) else { return false }
        return utf8.allSatisfy { c in
            (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "f"))
                || c == UInt8(ascii: "-")
        }
    }
}
