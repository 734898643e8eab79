import AgentCore

#if canImport(Glibc)
import Glibc
#endif

/// ``ContextFileSystem`` over the POSIX calls. Paths go through ``FilePathText`` so names
/// that are not UTF-8 keep their bytes.
public struct PosixContextFileSystem: ContextFileSystem {
    public init() {}

    public func linkStatus(_ path: String) -> ContextFileStatus? {
        var info = stat()
        guard FilePathText.withCString(path, { lstat($0, &info) }) == 0 else { return nil }
        return Self.status(of: info)
    }

    public func status(_ path: String) -> ContextFileStatus? {
        var info = stat()
        guard FilePathText.withCString(path, { systemStat($0, &info) }) == 0 else { return nil }
        return Self.status(of: info)
    }

    private static func status(of info: stat) -> ContextFileStatus {
        let kind: ContextFileStatus.Kind
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .regular
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symbolicLink
        default: kind = .other
        }
        let size = UInt64(max(0, info.st_size))
        let stamp = ContextFileStamp(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: size,
            modifiedNanoseconds: Int64(info.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_mtim.tv_nsec),
            changedNanoseconds: Int64(info.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_ctim.tv_nsec))
        return ContextFileStatus(kind: kind, size: size, stamp: stamp)
    }

    public func canonicalPath(_ path: String) throws(ContextFileSystemError) -> String {
        let resolved: String? = FilePathText.withCString(path) { cPath in
            guard let result = realpath(cPath, nil) else { return nil }
            defer { free(result) }
            return FilePathText.decode(Array(UnsafeRawBufferPointer(start: result, count: strlen(result))))
        }
        guard let resolved else { throw Self.error("lstat", path) }
        return resolved
    }

    public func directoryEntries(_ path: String, limit: Int) -> (entries: [ContextDirectoryEntry], truncated: Bool)? {
        guard let handle = FilePathText.withCString(path, { opendir($0) }) else { return nil }
        defer { closedir(handle) }
        var entries: [ContextDirectoryEntry] = []
        var truncated = false
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in FilePathText.decode(Array(raw.prefix { $0 != 0 })) }
            if name == "." || name == ".." { continue }
            if entries.count >= limit {
                truncated = true
                break
            }
            var isDirectory: Bool
            switch Int32(entry.pointee.d_type) {
            case Int32(DT_DIR): isDirectory = true
            case Int32(DT_UNKNOWN): isDirectory = linkStatus(joinPath(path, name))?.kind == .directory
            default: isDirectory = false
            }
            entries.append(ContextDirectoryEntry(name: name, isDirectory: isDirectory))
        }
        entries.sort { bytewisePrecedes($0.name, $1.name) }
        return (entries, truncated)
    }

    public func read(_ path: String, limit: Int) throws(ContextFileSystemError) -> [UInt8] {
        let fd = FilePathText.withCString(path) { open($0, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }
        guard fd >= 0 else { throw Self.error("open", path) }
        defer { close(fd) }
        // Sized by the file (one byte more, to see the end at once), grown while it grows:
        // most context files are far below `limit`.
        let expected = FileInfo.of(descriptor: fd).map { $0.kind == .regular ? $0.size + 1 : 4096 } ?? 4096
        var bytes = [UInt8](repeating: 0, count: min(limit, max(expected, 1)))
        var filled = 0
        while filled < limit {
            if filled == bytes.count {
                bytes.append(contentsOf: repeatElement(0, count: min(limit, bytes.count * 2) - bytes.count))
            }
            let room = bytes.count - filled
            let count = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, room) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Self.error("read", path)
            }
            if count == 0 { break }
            filled += count
        }
        bytes.removeSubrange(filled...)
        return bytes
    }

    private static func error(_ operation: String, _ path: String) -> ContextFileSystemError {
        let code = errno
        return ContextFileSystemError(operation: operation, path: path, code: code, message: String(cString: strerror(code)).lowercasedFirst)
    }
}

// At file scope `stat` names the function; inside the type it would name the struct.
private func systemStat(_ path: UnsafePointer<CChar>, _ info: inout stat) -> Int32 { stat(path, &info) }

extension String {
    /// Go prints errno texts starting in lower case ("no such file or directory").
    fileprivate var lowercasedFirst: String {
        guard let first else { return self }
        return first.lowercased() + dropFirst()
    }
}

/// `directory/name` without doubling a `/`.
func joinPath(_ directory: String, _ name: String) -> String {
    directory.hasSuffix("/") ? directory + name : directory + "/" + name
}
