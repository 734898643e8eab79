/// The directories whose events can change a resolve of some roots: each directory root,
/// each of its skills containers and their immediate subdirectories (the root's own when it
/// is named `skills`); a file root's parent; a missing root's nearest existing ancestor.
enum ContextWatchSet {
    static let containers = ["skills", ".agents/skills", ".claude/skills", ".codex/skills"]

    /// At most `limit` directories, in root order; at most
    /// ``ContextLimits/directoryEntries`` entries read from each container.
    static func directories(for roots: [ContextScanRoot], fileSystem: any ContextFileSystem, limit: Int) -> [String] {
        var out: [String] = []
        func add(_ path: String) { if out.count < limit { out.append(path) } }
        func addSubdirectories(_ path: String) {
            add(path)
            guard out.count < limit else { return }
            // As many entries as the resolver reads: cut at `limit` entries, the directories
            // among the rest would go unwatched with nothing said.
            guard let listing = fileSystem.directoryEntries(path, limit: ContextLimits.default.directoryEntries) else { return }
            for entry in listing.entries where entry.isDirectory {
                guard out.count < limit else { return }
                add(joinPath(path, entry.name))
            }
        }
        for root in roots where !root.path.isEmpty {
            guard out.count < limit else { break }
            switch fileSystem.linkStatus(root.path)?.kind {
            case .directory?:
                add(root.path)
                if root.path.split(separator: "/").last == "skills" { addSubdirectories(root.path) }
                for container in containers {
                    let path = joinPath(root.path, container)
                    if fileSystem.linkStatus(path)?.kind == .directory { addSubdirectories(path) }
                }
            case nil:
                var path = root.path
                while path != "/" {
                    path = parent(path)
                    if fileSystem.linkStatus(path)?.kind == .directory {
                        add(path)
                        break
                    }
                }
            default:
                add(parent(root.path))
            }
        }
        return out
    }

    static func parent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }
}
