import AgentCore
#if canImport(Glibc)
import Glibc
#endif

/// Path rules of the file API: absolute paths only, no `~` expansion,
/// `..` allowed, symbolic links followed to depth 40 with relative targets counted from the
/// link's directory, and missing trailing parts kept.
enum PathResolver {
    /// The parts of `path` between `/` bytes, empty ones dropped. Byte-wise, as Go's path
    /// functions: splitting on `Character`s would keep a `/` followed by a combining mark
    /// (one grapheme) inside a part, so `a/\u{301}b/..` cleaned to `/`, not `/a`.
    static func components(_ path: String) -> [String] {
        // Lossless: a `/` byte is never inside a multi-byte UTF-8 sequence.
        path.utf8.split(separator: UInt8(ascii: "/")).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Go's `filepath.Clean` for an absolute path (AgentCore's one rule).
    static func clean(_ path: String) -> String { cleanAbsolutePath(path) }

    static let maxLinks = 40

    /// The path with every existing symbolic link along it followed.
    static func resolve(_ path: String) throws(FileSystemError) -> String {
        var resolved: [String] = []
        var pending = components(clean(path))
        var links = 0
        while !pending.isEmpty {
            let part = pending.removeFirst()
            if part == "." || part.isEmpty { continue }
            if part == ".." {
                if !resolved.isEmpty { resolved.removeLast() }
                continue
            }
            let candidate = "/" + (resolved + [part]).joined(separator: "/")
            var info = stat()
            if FS.lstat(candidate, &info) != 0 {
                if errno == ENOENT || errno == ENOTDIR {
                    // Missing from here on: keep the rest as written.
                    return clean("/" + (resolved + [part] + pending).joined(separator: "/"))
                }
                throw FileSystemError.last("lstat", candidate)
            }
            guard info.st_mode & S_IFMT == S_IFLNK else {
                resolved.append(part)
                continue
            }
            links += 1
            guard links <= maxLinks else { throw FileSystemError(operation: "resolve", path: path, code: ELOOP) }
            guard let target = FS.readlink(candidate) else { throw FileSystemError.last("readlink", candidate) }
            if PathInput.isAbsolute(target) { resolved = [] }
            pending = components(target) + pending
        }
        return "/" + resolved.joined(separator: "/")
    }
}
