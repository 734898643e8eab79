import AgentCore

/// Turns scan roots into a ``ContextSnapshot``: a synchronous function of what the file
/// system answers (the caller owns roots, versions and when to resolve). Its one state is a
/// cache of what each file it read said, so a resolve reads only the files whose stamp moved.
///
/// Discovery is shallow: a directory root contributes its top-level `AGENTS.md`,
/// `CLAUDE.md`, `.cursorrules` and `.mcp.json`, and the skills in the immediate
/// subdirectories of its skills containers; a file root is classified by its name. Symlinked
/// files are followed only to regular files inside their scan root. The caps of
/// ``ContextLimits`` then apply in (kind, source) order, and the result is sorted by id.
///
/// Cost: at most ``ContextLimits/scanRoots`` roots, ``ContextLimits/directoryEntries``
/// entries read per directory, ``ContextLimits/examinedFiles`` files examined; of those, only
/// the ones that are new or whose ``ContextFileStamp`` moved since the last resolve (of this
/// resolver) are read, at most ``ContextLimits/resourceBytes`` + 1 bytes each, hashed and,
/// for a skill, parsed up to the end of its front matter; the payloads kept are read a second
/// time unless cached (at most ``ContextLimits/snapshotBytes`` in all). Every link is resolved
/// by `realpath`, which the kernel stops after 40 links, so a loop costs one failed call.
public struct ContextResolver: Sendable {
    public let fileSystem: any ContextFileSystem
    public let limits: ContextLimits
    /// Shared by the copies of this resolver; a new resolver starts cold.
    let cache = ContextFileCache()

    public init(fileSystem: any ContextFileSystem = PosixContextFileSystem(), limits: ContextLimits = .default) {
        self.fileSystem = fileSystem
        self.limits = limits
    }

    /// Resolves `roots` (first occurrence of a path wins) and appends `mcpServers` (the live
    /// servers' rows, which count toward the resource cap after the files).
    public func resolve(roots: [ContextScanRoot], mcpServers: [ContextResource] = [], version: UInt64 = 0) -> ContextSnapshot {
        var walk = Walk(fileSystem: fileSystem, limits: limits, previous: cache.current)
        var seenRoots = Set<String>()
        var kept = 0
        for root in roots where !root.path.isEmpty && seenRoots.insert(root.path).inserted {
            guard kept < limits.scanRoots else {
                walk.problem("more than \(limits.scanRoots) scan roots; the rest are not read")
                break
            }
            kept += 1
            walk.discover(root)
        }
        var resources = walk.resources.compactMap { $0 }
        resources = Self.firstSkillOfEachName(resources)
        var problems = walk.problems
        resources = applyCaps(resources, mcpServers: mcpServers, problems: &problems)
        resources = walk.loadPayloads(resources)
        cache.store(walk.cached)
        resources.sort { bytewisePrecedes($0.id, $1.id) }
        return ContextSnapshot(version: version, resources: resources, snapshotError: problems.first ?? "")
    }

    /// The first OK skill of each name wins (roots in order); later ones are dropped.
    static func firstSkillOfEachName(_ resources: [ContextResource]) -> [ContextResource] {
        var seen = Set<String>()
        return resources.filter { resource in
            guard resource.kind == .skill, resource.status == .ok else { return true }
            return seen.insert(resource.name).inserted
        }
    }

    /// The count and byte caps in (kind, source) order, then the live servers after them;
    /// rows past ``ContextLimits/listedResources`` are left out.
    func applyCaps(_ files: [ContextResource], mcpServers: [ContextResource], problems: inout [String]) -> [ContextResource] {
        var resources = files.enumerated().sorted { a, b in
            if a.element.kind != b.element.kind { return a.element.kind < b.element.kind }
            if a.element.source != b.element.source { return bytewisePrecedes(a.element.source, b.element.source) }
            return a.offset < b.offset
        }.map(\.element)
        let fileCount = resources.count
        resources += mcpServers
        var total = 0
        var countHit = false, bytesHit = false
        for index in resources.indices {
            if index >= limits.resources {
                resources[index].status = .excluded
                resources[index].error = "dropped to fit \(limits.resources)-resource snapshot count cap"
                resources[index].payload = []
                countHit = true
                continue
            }
            guard resources[index].status == .ok else { continue }
            // An OK file's payload is the whole file: its size (loaded after the caps).
            let size = index < fileCount ? Int(resources[index].sizeBytes) : resources[index].payload.count
            if total + size > limits.snapshotBytes {
                resources[index].status = .excluded
                resources[index].error = "dropped to fit \(limits.snapshotBytes)-byte aggregate cap"
                resources[index].payload = []
                bytesHit = true
                continue
            }
            total += size
        }
        if countHit { problems.append("snapshot exceeds \(limits.resources)-resource count cap") }
        if bytesHit { problems.append("snapshot exceeds \(limits.snapshotBytes)-byte aggregate cap") }
        if resources.count > limits.listedResources {
            problems.append("snapshot lists \(limits.listedResources) of \(resources.count) resources")
            resources.removeSubrange(limits.listedResources...)
        }
        return resources
    }
}
