/// Go's `path/filepath` `Clean`, `Dir` and `Join` on Unix, which the reference uses to walk
/// from a process's cgroup up to the root.
enum GoPath {
    /// `filepath.Clean`: the shortest equivalent path ("" and "a/.." are ".").
    static func clean(_ path: String) -> String {
        guard !path.isEmpty else { return "." }
        let rooted = path.hasPrefix("/")
        var kept: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..":
                if let last = kept.last, last != ".." {
                    kept.removeLast()
                } else if !rooted {
                    kept.append(part)
                }
            default: kept.append(part)
            }
        }
        let joined = kept.joined(separator: "/")
        if rooted { return "/" + joined }
        return joined.isEmpty ? "." : joined
    }

    /// `filepath.Dir`: everything before the last slash, cleaned.
    static func dir(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return clean(String(path[...slash]))
    }

    /// `filepath.Join`: the non-empty elements joined by slashes, cleaned.
    static func join(_ elements: String...) -> String {
        let parts = elements.filter { !$0.isEmpty }
        return parts.isEmpty ? "" : clean(parts.joined(separator: "/"))
    }
}
