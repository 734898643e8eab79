import AgentCore

#if canImport(Glibc)
import Glibc
#endif

extension ContextResolver {
    /// One resolve's walk: the resources found in root order (nil where a later, valid
    /// occurrence replaced one), and the snapshot-level problems.
    struct Walk {
        let fileSystem: any ContextFileSystem
        let limits: ContextLimits
        var resources: [ContextResource?] = []
        var problems: [String] = []
        private var indexByID: [String: Int] = [:]
        private var examined = 0
        /// Where each OK file's payload is read from (its link target, or itself).
        private var payloadPath: [String: String] = [:]
        /// What the last resolve left in the cache, and what this one leaves.
        private let previous: [ContextFileCache.Key: ContextFileCache.Entry]
        private(set) var cached: [ContextFileCache.Key: ContextFileCache.Entry] = [:]
        /// The wall clock when this resolve began, before any `stat`.
        private let started: Int64

        init(fileSystem: any ContextFileSystem, limits: ContextLimits, previous: [ContextFileCache.Key: ContextFileCache.Entry] = [:]) {
            self.fileSystem = fileSystem
            self.limits = limits
            self.previous = previous
            self.started = ContextFileCache.now()
        }

        mutating func problem(_ text: String) {
            if !problems.contains(text) { problems.append(text) }
        }

        mutating func discover(_ root: ContextScanRoot) {
            guard let status = fileSystem.status(root.path) else { return }
            guard status.kind == .directory else {
                if let link = fileSystem.linkStatus(root.path) {
                    classifyFile(root, path: root.path, status: link.kind == .symbolicLink ? status : link)
                }
                return
            }
            if let listing = entries(root.path) {
                for entry in listing where !entry.isDirectory {
                    let isInstruction = ContextFileNames.instructionFiles.contains(entry.name)
                    guard isInstruction || entry.name == ContextFileNames.mcpConfig else { continue }
                    let path = joinPath(root.path, entry.name)
                    guard let info = fileSystem.linkStatus(path) else { continue }
                    if isInstruction { instructionFile(root, path: path, info: info) } else { mcpConfig(root, path: path, info: info) }
                }
            }
            var containers: [String] = []
            if lastPathComponent(of: root.path) == "skills" { containers.append(root.path) }
            for relative in ContextFileNames.skillContainers {
                let container = joinPath(root.path, relative)
                if fileSystem.status(container)?.kind == .directory { containers.append(container) }
            }
            for container in containers {
                guard let listing = entries(container) else { continue }
                for entry in listing where entry.isDirectory {
                    let meta = joinPath(joinPath(container, entry.name), ContextFileNames.skillMeta)
                    guard let info = fileSystem.linkStatus(meta) else { continue }
                    skill(root, path: meta, info: info)
                }
            }
        }

        private mutating func entries(_ directory: String) -> [ContextDirectoryEntry]? {
            guard let listing = fileSystem.directoryEntries(directory, limit: limits.directoryEntries) else { return nil }
            if listing.truncated {
                problem("directory \(goQuote(directory)) has more than \(limits.directoryEntries) entries; the rest are not read")
            }
            return listing.entries
        }

        private mutating func classifyFile(_ root: ContextScanRoot, path: String, status: ContextFileStatus) {
            let name = lastPathComponent(of: path)
            if ContextFileNames.instructionFiles.contains(name) {
                instructionFile(root, path: path, info: status)
            } else if name == ContextFileNames.mcpConfig {
                mcpConfig(root, path: path, info: status)
            } else if name == ContextFileNames.skillMeta {
                skill(root, path: path, info: status)
            }
        }

        /// Counts a file about to be read; false (and a problem) past the bound.
        private mutating func admit() -> Bool {
            guard examined < limits.examinedFiles else {
                problem("more than \(limits.examinedFiles) context files found; the rest are not read")
                return false
            }
            examined += 1
            return true
        }

        // MARK: Kinds

        private mutating func instructionFile(_ root: ContextScanRoot, path: String, info: ContextFileStatus) {
            guard admit() else { return }
            var (resource, facts, readPath) = fileResource(.instructionFile, root, path: path, info: info, sourceIsTarget: true)
            if case .instruction(let line)? = facts { resource.description = line }
            append(resource, payloadFrom: readPath)
        }

        private mutating func mcpConfig(_ root: ContextScanRoot, path: String, info: ContextFileStatus) {
            guard admit() else { return }
            var (resource, facts, _) = fileResource(.mcpConfig, root, path: path, info: info, sourceIsTarget: false)
            var entryRows: [ContextResource] = []
            switch facts {
            case .mcpConfig(.success(let entryErrors))?:
                for entry in entryErrors {
                    entryRows.append(
                        ContextResource(
                            kind: .mcpConfig, source: path + "#" + Self.cut(entry.name, bytes: 256), sourcePath: root.userSource,
                            contentHash: resource.contentHash, sizeBytes: resource.sizeBytes, status: .invalid,
                            error: entry.message, name: entry.name))
                }
            case .mcpConfig(.failure(let error))?:
                resource.status = .invalid
                resource.error = error.reason
            default:
                break
            }
            append(resource)
            for row in entryRows { append(row) }
        }

        private mutating func skill(_ root: ContextScanRoot, path: String, info: ContextFileStatus) {
            guard admit() else { return }
            let directory = parentDirectory(of: path)
            let parent = lastPathComponent(of: directory)
            var (resource, facts, readPath) = fileResource(.skill, root, path: path, info: info, sourceIsTarget: false)
            resource.source = directory
            switch facts {
            case .skill(.success(let front))?:
                if front.name != parent {
                    resource.status = .invalid
                    resource.error = "front-matter name \(goQuote(front.name)) does not match directory \(goQuote(parent))"
                } else if !SkillFrontMatter.isValidName(front.name) {
                    resource.status = .invalid
                    resource.error = "skill name \(goQuote(front.name)) is not kebab-case"
                } else {
                    resource.name = front.name
                    resource.description = front.description
                }
            case .skill(.failure(let error))?:
                resource.status = .invalid
                resource.error = error.message
            default:
                break
            }
            append(resource, payloadFrom: readPath)
        }

        // MARK: Reading

        /// The header, status and hash of a file resource, and what its kind's checks found
        /// when it was read whole (the payload itself is loaded after the caps).
        private mutating func fileResource(
            _ kind: ContextResourceKind, _ root: ContextScanRoot, path: String, info: ContextFileStatus, sourceIsTarget: Bool
        ) -> (ContextResource, ContextFileCache.Facts?, String?) {
            var resource = ContextResource(kind: kind, source: path, sourcePath: root.userSource, sizeBytes: info.size)
            let target: (path: String, info: ContextFileStatus)
            switch readTarget(path, info: info, scanRoot: root.path) {
            case .failure(let failure):
                resource.status = failure.status
                resource.error = failure.message
                return (resource, nil, nil)
            case .success(let found):
                target = found
            }
            if sourceIsTarget { resource.source = target.path }
            resource.sizeBytes = target.info.size
            switch content(kind, path: target.path, info: target.info) {
            case .failure(let error):
                resource.status = .unreadable
                resource.error = error.description
                return (resource, nil, nil)
            case .success(.oversize(let size, let hash)):
                resource.sizeBytes = size
                resource.status = .oversize
                resource.error = "file size \(size) exceeds per-resource cap of \(limits.resourceBytes) bytes"
                resource.contentHash = hash
                return (resource, nil, nil)
            case .success(.read(let size, let hash, let facts)):
                resource.sizeBytes = size
                resource.contentHash = hash
                return (resource, facts, target.path)
            }
        }

        /// What `path`'s bytes say: from the cache when its stamp is the one they were read
        /// with (and that read settled, or was this resolve's), else read, hashed and checked.
        private mutating func content(
            _ kind: ContextResourceKind, path: String, info: ContextFileStatus
        ) -> Result<ContextFileCache.Content, ContextFileSystemError> {
            let key = ContextFileCache.Key(kind: kind, path: path)
            if let stamp = info.stamp {
                if let entry = cached[key], entry.stamp == stamp { return .success(entry.content) }
                if let entry = previous[key], entry.settled, entry.stamp == stamp {
                    cached[key] = entry
                    return .success(entry.content)
                }
            }
            let bytes: [UInt8]
            do {
                bytes = try fileSystem.read(path, limit: limits.resourceBytes + 1)
            } catch {
                return .failure(error)
            }
            let content: ContextFileCache.Content
            if info.size > UInt64(limits.resourceBytes) || bytes.count > limits.resourceBytes {
                content = .oversize(size: max(info.size, UInt64(bytes.count)), hash: Self.sha256(bytes.prefix(limits.resourceBytes)))
            } else {
                content = .read(size: UInt64(bytes.count), hash: Self.sha256(bytes), facts: facts(kind, bytes))
            }
            if let stamp = info.stamp {
                cached[key] = ContextFileCache.Entry(stamp: stamp, settled: ContextFileCache.isSettled(stamp, at: started), content: content)
            }
            return .success(content)
        }

        /// The kind's checks of a whole file: an instruction file's first line, a skill's
        /// front matter (not its body; the description cut), an `.mcp.json`'s entry errors (at most
        /// ``ContextLimits/mcpEntryRowsPerFile``) or why it cannot be used.
        private func facts(_ kind: ContextResourceKind, _ bytes: [UInt8]) -> ContextFileCache.Facts {
            switch kind {
            case .instructionFile:
                return .instruction(firstLine: InstructionText.firstLine(utf8: bytes))
            case .skill:
                let parsed = Result { () throws(SkillFrontMatter.ParseError) in try SkillFrontMatter.parse(utf8: bytes, readingBody: false) }
                return .skill(
                    parsed.map { front in
                        var kept = front
                        kept.description = Self.cut(front.description, bytes: limits.descriptionBytes)
                        return kept
                    })
            case .mcpConfig, .mcpServer:
                let rows = limits.mcpEntryRowsPerFile
                return .mcpConfig(
                    Result { () throws(MCPConfigFileError) in
                        Array(try MCPConfigFile.parse(bytes) { _ in nil }.entryErrors.prefix(rows))
                    })
            }
        }

        struct TargetFailure: Error {
            var status: ContextResourceStatus
            var message: String
        }

        /// The file to read for `path`: itself, or for a link its target, which must be a
        /// regular file inside the (canonical) scan root.
        private func readTarget(_ path: String, info: ContextFileStatus, scanRoot: String) -> Result<(path: String, info: ContextFileStatus), TargetFailure> {
            guard info.kind == .symbolicLink else {
                guard info.kind == .regular else {
                    return .failure(TargetFailure(status: .invalid, message: "\(goQuote(path)) is not a regular file"))
                }
                return .success((path, info))
            }
            let target: String
            do {
                target = try fileSystem.canonicalPath(path)
            } catch {
                let why = error.code == ELOOP ? "EvalSymlinks: too many links" : error.description
                return .failure(TargetFailure(status: .unreadable, message: "symlink resolve: \(why)"))
            }
            let root = (try? fileSystem.canonicalPath(scanRoot)) ?? scanRoot
            guard target == root || target.hasPrefix(root.hasSuffix("/") ? root : root + "/") else {
                return .failure(TargetFailure(status: .invalid, message: "symlink target \(goQuote(target)) escapes scan root \(goQuote(scanRoot))"))
            }
            guard let targetInfo = fileSystem.status(target) else {
                return .failure(TargetFailure(status: .unreadable, message: "stat \(target): no such file or directory"))
            }
            guard targetInfo.kind == .regular else {
                return .failure(TargetFailure(status: .invalid, message: "symlink target \(goQuote(target)) is not a regular file"))
            }
            return .success((target, targetInfo))
        }

        /// Adds a resource unless its id is taken; an OK one replaces an earlier failed one
        /// (the same file can escape a narrow root and sit inside a later, wider one).
        private mutating func append(_ resource: ContextResource, payloadFrom readPath: String? = nil) {
            if let previous = indexByID[resource.id] {
                guard resources[previous]?.status != .ok, resource.status == .ok else { return }
                resources[previous] = nil
            }
            indexByID[resource.id] = resources.count
            resources.append(resource)
            if resource.status == .ok, let readPath { payloadPath[resource.id] = readPath }
        }

        /// Reads the payloads of the OK instruction files and skills that survived the caps
        /// (at most ``ContextLimits/snapshotBytes`` in all), or takes them from the cache. A
        /// file that changed since it was hashed gets its new bytes and hash when they still
        /// fit (and is read again next time), else it is `unreadable`. The cache keeps these
        /// payloads only.
        mutating func loadPayloads(_ resources: [ContextResource]) -> [ContextResource] {
            var loaded = Set<ContextFileCache.Key>()
            var out = resources
            for index in out.indices {
                let resource = out[index]
                guard resource.status == .ok, resource.kind == .instructionFile || resource.kind == .skill,
                    let path = payloadPath[resource.id]
                else { continue }
                let key = ContextFileCache.Key(kind: resource.kind, path: path)
                if let entry = cached[key], let payload = entry.payload,
                    case .read(_, let hash, _) = entry.content, hash == resource.contentHash
                {
                    out[index].payload = payload
                    loaded.insert(key)
                    continue
                }
                guard let bytes = try? fileSystem.read(path, limit: limits.resourceBytes + 1),
                    bytes.count <= limits.resourceBytes, UInt64(bytes.count) <= resource.sizeBytes
                else {
                    out[index].status = .unreadable
                    out[index].error = "file changed while it was read"
                    cached[key] = nil
                    continue
                }
                let hash = Self.sha256(bytes)
                if hash != resource.contentHash {
                    out[index].contentHash = hash
                    out[index].sizeBytes = UInt64(bytes.count)
                    cached[key] = nil
                } else {
                    cached[key]?.payload = bytes
                    loaded.insert(key)
                }
                out[index].payload = bytes
            }
            for (key, entry) in cached where entry.payload != nil && !loaded.contains(key) { cached[key]?.payload = nil }
            return out
        }

        static func sha256(_ bytes: some Collection<UInt8>) -> [UInt8] {
            var hash = SHA256()
            hash.update(Array(bytes))
            return hash.finalize()
        }

        /// At most `bytes` UTF-8 bytes of `text`, cut on a character boundary (walking the
        /// characters of the prefix kept only).
        static func cut(_ text: String, bytes limit: Int) -> String {
            guard text.utf8.count > limit else { return text }
            var end = text.startIndex
            while end < text.endIndex {
                let next = text.index(after: end)
                if text.utf8.distance(from: text.startIndex, to: next) > limit { break }
                end = next
            }
            return String(text[..<end])
        }
    }
}
