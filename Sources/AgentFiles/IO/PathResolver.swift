#if canImport(Glibc)
import Glibc
#endif

/// Path rules of the file API (spec file-api §2): absolute paths only, no `~` expansion,
/// `..` allowed, symbolic links followed to depth 40 with relative targets counted from the
/// link's directory, and missing trailing parts kept.
enum PathResolver {
    /// Go's `filepath.Clean` for an absolute path.
    static func clean(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": if !parts.isEmpty { parts.removeLast() }
            default: parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }

    static let maxLinks = 40

    /// The path with every existing symbolic link along it followed.
    static func resolve(_ path: String) throws(FileSystemError) -> String {
        var resolved: [String] = []
        var pending = clean(path).split(separator: "/").map(String.init)
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
            if target.hasPrefix("/") { resolved = [] }
            pending = target.split(separator: "/").map(String.init) + pending
        }
        return "/" + resolved.joined(separator: "/")
    }
}
