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

        init(fileSystem: any ContextFileSystem, limits: ContextLimits) {
            self.fileSystem = fileSystem
            self.limits = limits
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
            var (resource, bytes, readPath) = fileResource(.instructionFile, root, path: path, info: info, sourceIsTarget: true)
            if resource.status == .ok, let bytes {
                resource.description = InstructionText.firstLine(String(decoding: bytes, as: UTF8.self))
            }
            append(resource, payloadFrom: readPath)
        }

        private mutating func mcpConfig(_ root: ContextScanRoot, path: String, info: ContextFileStatus) {
            guard admit() else { return }
            var (resource, bytes, _) = fileResource(.mcpConfig, root, path: path, info: info, sourceIsTarget: false)
            var entryRows: [ContextResource] = []
            if resource.status == .ok, let bytes {
                do {
                    let parsed = try MCPConfigFile.parse(bytes) { _ in nil }
                    for entry in parsed.entryErrors.prefix(limits.mcpEntryRowsPerFile) {
                        entryRows.append(ContextResource(
                            kind: .mcpConfig, source: path + "#" + Self.cut(entry.name, bytes: 256), sourcePath: root.userSource,
                            contentHash: resource.contentHash, sizeBytes: resource.sizeBytes, status: .invalid,
                            error: entry.message, name: entry.name))
                    }
                } catch {
                    resource.status = .invalid
                    resource.error = error.reason
                }
            }
            append(resource)
            for row in entryRows { append(row) }
        }

        private mutating func skill(_ root: ContextScanRoot, path: String, info: ContextFileStatus) {
            guard admit() else { return }
            let directory = parentDirectory(of: path)
            let parent = lastPathComponent(of: directory)
            var (resource, bytes, readPath) = fileResource(.skill, root, path: path, info: info, sourceIsTarget: false)
            resource.source = directory
            if resource.status == .ok, let bytes {
                do {
                    let front = try SkillFrontMatter.parse(String(decoding: bytes, as: UTF8.self))
                    if front.name != parent {
                        resource.status = .invalid
                        resource.error = "front-matter name \(goQuote(front.name)) does not match directory \(goQuote(parent))"
                    } else if !SkillFrontMatter.isValidName(front.name) {
                        resource.status = .invalid
                        resource.error = "skill name \(goQuote(front.name)) is not kebab-case"
                    } else {
                        resource.name = front.name
                        resource.description = Self.cut(front.description, bytes: limits.descriptionBytes)
                    }
                } catch {
                    resource.status = .invalid
                    resource.error = error.message
                }
            }
            append(resource, payloadFrom: readPath)
        }

        // MARK: Reading

        /// The header, status and hash of a file resource, and its bytes when it is OK
        /// (for the kind's checks; the payload itself is loaded after the caps).
        private mutating func fileResource(
            _ kind: ContextResourceKind, _ root: ContextScanRoot, path: String, info: ContextFileStatus, sourceIsTarget: Bool
        ) -> (ContextResource, [UInt8]?, String?) {
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
            let bytes: [UInt8]
            do {
                bytes = try fileSystem.read(target.path, limit: limits.resourceBytes + 1)
            } catch {
                resource.status = .unreadable
                resource.error = error.description
                return (resource, nil, nil)
            }
            if target.info.size > UInt64(limits.resourceBytes) || bytes.count > limits.resourceBytes {
                resource.sizeBytes = max(target.info.size, UInt64(bytes.count))
                resource.status = .oversize
                resource.error = "file size \(resource.sizeBytes) exceeds per-resource cap of \(limits.resourceBytes) bytes"
                resource.contentHash = Self.sha256(bytes.prefix(limits.resourceBytes))
                return (resource, nil, nil)
            }
            resource.sizeBytes = UInt64(bytes.count)
            resource.contentHash = Self.sha256(bytes)
            return (resource, bytes, target.path)
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
        /// (at most ``ContextLimits/snapshotBytes`` in all). A file that changed since it was
        /// hashed gets its new bytes and hash when they still fit, else it is `unreadable`.
        func loadPayloads(_ resources: [ContextResource]) -> [ContextResource] {
            resources.map { original in
                var resource = original
                guard resource.status == .ok, resource.kind == .instructionFile || resource.kind == .skill,
                      let path = payloadPath[resource.id]
                else { return resource }
                guard let bytes = try? fileSystem.read(path, limit: limits.resourceBytes + 1),
                      bytes.count <= limits.resourceBytes, UInt64(bytes.count) <= resource.sizeBytes
                else {
                    resource.status = .unreadable
                    resource.error = "file changed while it was read"
                    return resource
                }
                let hash = Self.sha256(bytes)
                if hash != resource.contentHash {
                    resource.contentHash = hash
                    resource.sizeBytes = UInt64(bytes.count)
                }
                resource.payload = bytes
                return resource
            }
        }

        static func sha256(_ bytes: some Collection<UInt8>) -> [UInt8] {
            var hash = SHA256()
            hash.update(Array(bytes))
            return hash.finalize()
        }

        /// At most `bytes` UTF-8 bytes of `text`, cut on a character boundary.
        static func cut(_ text: String, bytes limit: Int) -> String {
            guard text.utf8.count > limit else { return text }
            var out = ""
            for character in text {
                if out.utf8.count + character.utf8.count > limit { break }
                out.append(character)
            }
            return out
        }
    }
}
