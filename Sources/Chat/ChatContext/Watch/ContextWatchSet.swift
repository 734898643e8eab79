/// The directories whose events can change a resolve of some roots: each directory root,
/// each of its skills containers and their immediate subdirectories (the root's own when it
/// is named `skills`); a file root's parent; a missing root's nearest existing ancestor.
///
/// Links are followed as the resolver follows them (`stat`, as the reference's `os.Stat`): a
/// root or a container that is a link to a directory is read through it, so its target is
/// watched, by its canonical path (a linked working directory, `.claude/skills ->
/// ../.agents/skills`). A skill directory is an entry that is itself a directory, as the
/// resolver takes it. Each directory comes once however many paths lead to it, and nothing
/// is descended, so a link loop costs one failed `stat` (ELOOP: the path is missing).
enum ContextWatchSet {
    static let containers = ["skills", ".agents/skills", ".claude/skills", ".codex/skills"]

    /// At most `limit` directories, in root order; at most
    /// ``ContextLimits/directoryEntries`` entries read from each container.
    static func directories(for roots: [ContextScanRoot], fileSystem: any ContextFileSystem, limit: Int) -> [String] {
        var out: [String] = []
        var seen = Set<String>()
        func add(_ path: String) {
            if out.count < limit, seen.insert(path).inserted { out.append(path) }
        }
        /// `path` with every link resolved (it is one, or lies under one), or as it is when
        /// that fails (gone meanwhile).
        func canonical(_ path: String) -> String { (try? fileSystem.canonicalPath(path)) ?? path }
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
            switch fileSystem.status(root.path)?.kind {
            case .directory?:
                let directory = canonical(root.path)
                add(directory)
                if root.path.split(separator: "/").last == "skills" { addSubdirectories(directory) }
                for container in containers {
                    let path = joinPath(root.path, container)
                    if fileSystem.status(path)?.kind == .directory { addSubdirectories(canonical(path)) }
                }
            case nil:
                var path = root.path
                while path != "/" {
                    path = parent(path)
                    if fileSystem.status(path)?.kind == .directory {
                        add(canonical(path))
                        break
                    }
                }
            default:
                add(canonical(parent(root.path)))
            }
        }
        return out
    }

    static func parent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }
}
