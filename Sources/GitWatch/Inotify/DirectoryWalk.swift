import Glibc

/// Lists a directory's subdirectories without following symlinks (d_type, else lstat).
enum DirectoryWalk {
    /// Names of the subdirectories of `path`, `.` and `..` left out; nil if it cannot be read
    /// or a name is not UTF-8 (such a directory could not be watched by its path here).
    static func subdirectories(of path: String) -> [String]? {
        guard let directory = opendir(path) else { return nil }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let type = entry.pointee.d_type
            let decoded = withUnsafePointer(to: &entry.pointee.d_name) {
                String(validatingCString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
            }
            guard let name = decoded else { return nil }
            if name == "." || name == ".." { continue }
            switch Int(type) {
            case Int(DT_DIR): names.append(name)
            case Int(DT_UNKNOWN): if isDirectory(path + "/" + name) { names.append(name) }
            default: continue
            }
        }
        return names
    }

    /// A real directory (not a symlink to one).
    static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// Whether `path` exists (any type, symlinks not followed).
    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }
}
