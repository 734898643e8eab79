import AgentCore
import AgentHTTP
import CHostStats
import HTTPTypes

#if canImport(Glibc)
import Glibc
#endif

/// A regular file opened for reading. It is opened with `O_NONBLOCK`, so a FIFO or a
/// device answers at once instead of blocking a thread in `open(2)`, and checked with
/// `fstat` on the descriptor (not the path, which can be swapped meanwhile): anything but a
/// regular file is refused. Reads are bounded by the caller, never "until EOF": pseudo-files
/// report size 0 and may hold hundreds of GiB (`/proc/self/pagemap`).
struct RegularFile: ~Copyable {
    /// Why a file could not be opened for reading.
    enum Failure: Error {
        /// The system call failed (not found, permission, ...).
        case system(FileSystemError)
        /// Something other than a regular file: a directory, FIFO, socket or device.
        case notRegular(isDirectory: Bool)
    }

    let descriptor: Int32
    let info: stat

    /// Opens `path` (links followed) and requires a regular file.
    init(path: String) throws(Failure) {
        let fd = FS.open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { throw .system(FileSystemError.last("open", path)) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let error = FileSystemError.last("stat", path)
            close(fd)
            throw .system(error)
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw .notRegular(isDirectory: info.st_mode & S_IFMT == S_IFDIR)
        }
        descriptor = fd
        self.info = info
    }

    deinit { close(descriptor) }

    /// Hands the open descriptor to the caller, who closes it from then on.
    consuming func releaseDescriptor() -> Int32 {
        let fd = descriptor
        discard self
        return fd
    }

    /// The size the file system reports (0 for most pseudo-files).
    var size: Int { Int(info.st_size) }

    /// Whether the file lives on a kernel pseudo-file system (sysfs, procfs, debugfs,
    /// tracefs, securityfs, configfs, cgroup), where the size reported is not the content's:
    /// a sysfs attribute says 4096 and holds a few bytes.
    var isOnPseudoFileSystem: Bool {
        var info = host_stats_fs()
        guard host_stats_fstatfs(descriptor, &info) == 0 else { return false }
        return Self.pseudoFileSystems.contains(info.type)
    }

    /// `f_type` of the pseudo-file systems (linux/magic.h).
    static let pseudoFileSystems: Set<UInt64> = [
        0x6265_6572,  // sysfs
        0x9fa0,  // proc
        0x6462_6720,  // debugfs
        0x7472_6163,  // tracefs
        0x7363_6673,  // securityfs
        0x6265_6570,  // configfs
        0x0027_e0eb,  // cgroup
        0x6367_7270,  // cgroup2
    ]

    /// Whether `other` is the same file (device and inode), for a second open by path.
    func isSame(as other: stat) -> Bool { info.st_dev == other.st_dev && info.st_ino == other.st_ino }

    /// Reads from `offset` until EOF or `limit` bytes, whichever is first; `token` is checked
    /// every 1 MiB. A caller that needs to know whether more was there asks for one more.
    func read(upTo limit: Int, from offset: Int = 0, path: String, token: CancelToken? = nil) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(min(limit, max(size - offset, 0), 64 << 20))
        var position = offset
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while out.count < limit {
            try token?.check()
            // Whole chunks are asked even near the limit: some pseudo-files refuse odd sizes
            // (pagemap reads in multiples of 8); what passes the limit is dropped.
            let n = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(position)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileSystemError.last("read", path)
            }
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<min(n, limit - out.count)])
            position += n
        }
        return out
    }

    /// Whether the file holds exactly `expected`: compared 1 MiB at a time (no second copy
    /// of the file); `token` is checked every chunk.
    func holds(_ expected: [UInt8], path: String, token: CancelToken? = nil) throws -> Bool {
        var position = 0
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            try token?.check()
            let n = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(position)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileSystemError.last("read", path)
            }
            if n == 0 { return position == expected.count }
            guard position + n <= expected.count else { return false }
            let same = chunk.withUnsafeBytes { read in
                expected.withUnsafeBytes { want in memcmp(read.baseAddress!, want.baseAddress! + position, n) == 0 }
            }
            guard same else { return false }
            position += n
        }
    }

    /// The SHA-256 (hex) of the whole file, or nil when it holds more than `limit` bytes.
    func sha256(limit: Int, path: String, token: CancelToken? = nil) throws -> String? {
        var hasher = SHA256()
        var total = 0
        var position = 0
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var steps = 0
        while true {
            steps += 1
            if steps & 15 == 0 { try token?.check() }
            let n = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(position)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileSystemError.last("read", path)
            }
            if n == 0 { break }
            total += n
            if total > limit { return nil }
            position += n
            chunk.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        return SHA256.hexString(hasher.finalize())
    }
}

extension RegularFile.Failure {
    /// The answer the read routes give: the OS error as the reference words it, or 400
    /// `open <path>: not a file`.
    func apiError(_ path: String) -> APIError {
        switch self {
        case .system(let error): error.apiError
        case .notRegular: APIError(.badRequest, "open \(path): not a file")
        }
    }
}
