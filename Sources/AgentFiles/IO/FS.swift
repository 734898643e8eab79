import AgentCore

#if canImport(Glibc)
import Glibc
#endif

/// The system calls the file API makes, taking paths as text in ``FilePathText``'s form,
/// so that names which are not UTF-8 can be listed and then addressed (never through
/// Swift's implicit String-to-C-string bridging, which would write the escape characters'
/// own UTF-8 instead of the bytes they stand for).
enum FS {
    static func open(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
        FilePathText.withCString(path) { Glibc.open($0, flags, mode) }
    }

    static func stat(_ path: String, _ info: inout Glibc.stat) -> Int32 {
        FilePathText.withCString(path) { systemStat($0, &info) }
    }

    static func lstat(_ path: String, _ info: inout Glibc.stat) -> Int32 {
        FilePathText.withCString(path) { systemLstat($0, &info) }
    }

    static func rename(_ from: String, _ to: String) -> Int32 {
        FilePathText.withCString(from) { a in FilePathText.withCString(to) { b in Glibc.rename(a, b) } }
    }

    static func mkdir(_ path: String, _ mode: mode_t) -> Int32 {
        FilePathText.withCString(path) { Glibc.mkdir($0, mode) }
    }

    @discardableResult
    static func unlink(_ path: String) -> Int32 {
        FilePathText.withCString(path) { Glibc.unlink($0) }
    }

    static func opendir(_ path: String) -> OpaquePointer? {
        FilePathText.withCString(path) { Glibc.opendir($0) }
    }

    /// The target of the link at `path`, or nil with errno set.
    static func readlink(_ path: String) -> String? { readSymbolicLink(path) }

    /// `mkdir -p` with `mode`: every missing directory of `path` made; an existing
    /// directory is fine; throws the first failure (ENOTDIR when a file is in the way).
    /// A loop, not a recursion: a client's path of any length (up to the body cap) must not
    /// run the thread out of stack; a path longer than PATH_MAX fails at once.
    static func makeDirectories(_ path: String, mode: mode_t = 0o755) throws(FileSystemError) {
        guard path.utf8.count < Int(PATH_MAX) else { throw FileSystemError(operation: "mkdir", path: path, code: ENAMETOOLONG) }
        // The missing directories, deepest first, up to the first that exists.
        var missing: [String] = []
        var current = path
        while true {
            var info = Glibc.stat()
            if stat(current, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFDIR else { throw FileSystemError(operation: "mkdir", path: current, code: ENOTDIR) }
                break
            }
            missing.append(current)
            let parent = parentDirectory(of: current)
            if parent == current || parent == "/" || parent == "." { break }
            current = parent
        }
        for directory in missing.reversed() where mkdir(directory, mode) != 0 {
            let error = FileSystemError.last("mkdir", directory)
            // Made meanwhile by someone else: fine if it is a directory now. A dangling
            // symbolic link (or a file) there is not one (Go's MkdirAll says "file exists").
            var info = Glibc.stat()
            guard error.code == EEXIST, stat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { throw error }
        }
    }

    /// The names in the directory at `path` (without `.` and `..`), or nil with errno set.
    static func entries(_ path: String, limit: Int = .max) -> [String]? {
        guard let handle = opendir(path) else { return nil }
        defer { closedir(handle) }
        var names: [String] = []
        while names.count < limit, let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in FilePathText.decode(Array(raw.prefix { $0 != 0 })) }
            if name == "." || name == ".." { continue }
            names.append(name)
        }
        return names
    }
}

// At file scope `stat` names the function; inside `FS` it names the method (and
// `Glibc.stat(...)` the struct's initializer).
private func systemStat(_ path: UnsafePointer<CChar>, _ info: inout stat) -> Int32 { stat(path, &info) }
private func systemLstat(_ path: UnsafePointer<CChar>, _ info: inout stat) -> Int32 { lstat(path, &info) }
