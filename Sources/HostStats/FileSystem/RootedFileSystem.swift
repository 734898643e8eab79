import CHostStats
#if canImport(Glibc)
import Glibc
#endif

/// The files under a root directory: `/` is the machine; another root is a fixture tree
/// laid out as `/proc` and `/sys` are (`<root>/sys/fs/cgroup/...`).
public struct RootedFileSystem: HostFileSystem {
    /// The machine's own files.
    public static let machine = RootedFileSystem(root: "/")

    /// The directory the reference's absolute paths are read under.
    public let root: String

    public init(root: String) {
        var root = root
        while root.count > 1, root.hasSuffix("/") { root.removeLast() }
        self.root = root.isEmpty ? "/" : root
    }

    /// Where `path` is on disk.
    func location(_ path: String) -> String {
        root == "/" ? path : root + (path.hasPrefix("/") ? path : "/" + path)
    }

    public func read(_ path: String) -> Result<[UInt8], FileError> {
        let fd = open(location(path), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(FileError(operation: "open", path: path, errno: errno)) }
        defer { close(fd) }
        // /proc and /sys report sizes of 0 or 4096: read to the end, up to the bound.
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while bytes.count < HostFiles.maxFileBytes {
            let wanted = min(chunk.count, HostFiles.maxFileBytes - bytes.count)
            let got = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, wanted) }
            if got < 0 {
                if errno == EINTR { continue }
                return .failure(FileError(operation: "read", path: path, errno: errno))
            }
            if got == 0 { break }
            bytes += chunk[0..<got]
        }
        return .success(bytes)
    }

    public func exists(_ path: String) -> Result<Bool, FileError> {
        var info = stat()
        if stat(location(path), &info) == 0 { return .success(true) }
        if errno == ENOENT { return .success(false) }
        return .failure(FileError(operation: "stat", path: path, errno: errno))
    }

    /// On the machine, the mount's `statfs` type; under a fixture root (never a cgroup
    /// mount), whether it holds `cgroup.controllers`, which only the unified hierarchy has.
    public func isCgroup2(_ path: String) -> Bool {
        guard root == "/" else { return (try? exists(path + "/cgroup.controllers").get()) == true }
        var info = host_stats_fs()
        guard host_stats_statfs(path, &info) == 0 else { return false }
        return info.type == 0x6367_7270
    }
}

/// Files held in memory (fuzzing, small unit tests): a path maps to its bytes or to the
/// errno its open fails with; a directory is any prefix of a file's path.
public struct MemoryFileSystem: HostFileSystem {
    public var files: [String: [UInt8]]
    public var failures: [String: Int32]
    public var cgroup2: Bool

    public init(files: [String: String] = [:], failures: [String: Int32] = [:], cgroup2: Bool = false) {
        self.files = files.mapValues { Array($0.utf8) }
        self.failures = failures
        self.cgroup2 = cgroup2
    }

    public func read(_ path: String) -> Result<[UInt8], FileError> {
        if let code = failures[path] { return .failure(FileError(operation: "open", path: path, errno: code)) }
        guard let bytes = files[path] else {
            let isDirectory = files.keys.contains { $0.hasPrefix(path + "/") }
            return .failure(FileError(operation: isDirectory ? "read" : "open", path: path, errno: isDirectory ? EISDIR : ENOENT))
        }
        return .success(Array(bytes.prefix(HostFiles.maxFileBytes)))
    }

    public func exists(_ path: String) -> Result<Bool, FileError> {
        if let code = failures[path], code != ENOENT { return .failure(FileError(operation: "stat", path: path, errno: code)) }
        return .success(files[path] != nil || files.keys.contains { $0.hasPrefix(path + "/") })
    }

    public func isCgroup2(_ path: String) -> Bool { cgroup2 }
}
