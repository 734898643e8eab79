import AgentCore

/// `GET /context-config`, the legacy view: the instruction file of each instruction
/// directory (then the working directory), sanitised and cut to 64 KiB, and the skills of
/// the skill directories (bad or mismatched ones skipped, the first of a name kept), as
/// chat message parts.
///
/// Cost: at most ``ContextLimits/directoryEntries`` names read per directory and one file
/// of at most 64 KiB read per instruction directory and per skill directory entry (at most
/// ``maxSkills`` skills, and ``maxExaminedSkills`` entries examined in all).
struct LegacyContextConfig: Sendable {
    /// Skills listed at most.
    static let maxSkills = 500
    /// Skill directory entries examined at most, whether their skill is listed or not.
    static let maxExaminedSkills = 1000
    static let fileBytes = 64 * 1024

    let configuration: ChatContextOptions.Configuration
    let home: String
    let workingDirectory: String
    var fileSystem: any ContextFileSystem = PosixContextFileSystem()
    var directoryEntries = ContextLimits.default.directoryEntries

    struct Response: Encodable, Sendable {
        var parts: [Part]
    }

    /// A `codersdk.ChatMessagePart`: the keys without omitempty always appear.
    struct Part: Encodable, Sendable {
        var type: String
        var contextFilePath: String?
        var contextFileContent: String?
        var contextFileTruncated: Bool?
        var skillName = ""
        var skillDescription: String?
        var skillDir: String?
        var skillMetaFile: String?

        enum CodingKeys: String, CodingKey {
            case type, text, url, mediaType = "media_type", fileName = "file_name", startLine = "start_line", endLine = "end_line"
            case content, contextFilePath = "context_file_path", contextFileContent = "context_file_content"
            case contextFileTruncated = "context_file_truncated", skillName = "skill_name", skillDescription = "skill_description"
            case skillDir = "skill_dir", skillMetaFile = "context_file_skill_meta_file"
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(type, forKey: .type)
            try c.encode("", forKey: .text)
            try c.encode("", forKey: .url)
            try c.encode("", forKey: .mediaType)
            try c.encode("", forKey: .fileName)
            try c.encode(0, forKey: .startLine)
            try c.encode(0, forKey: .endLine)
            try c.encodeNil(forKey: .content)
            try c.encode(contextFilePath ?? "", forKey: .contextFilePath)
            try c.encode(skillName, forKey: .skillName)
            try c.encodeIfPresent(contextFileContent, forKey: .contextFileContent)
            if contextFileTruncated == true { try c.encode(true, forKey: .contextFileTruncated) }
            try c.encodeIfPresent(skillDescription, forKey: .skillDescription)
            try c.encodeIfPresent(skillDir, forKey: .skillDir)
            try c.encodeIfPresent(skillMetaFile, forKey: .skillMetaFile)
        }
    }

    func response() -> Response {
        Response(parts: instructionParts() + skillParts())
    }

    func instructionParts() -> [Part] {
        var directories = ChatContextOptions.Configuration.resolve(configuration.instructionsDirs, home: home, workingDirectory: workingDirectory)
        if !directories.contains(workingDirectory) { directories.append(workingDirectory) }
        let wanted = configuration.instructionsFile.goTrimmed.lowercased()
        var parts: [Part] = []
        for directory in directories {
            guard let listing = fileSystem.directoryEntries(directory, limit: directoryEntries) else { continue }
            guard let entry = listing.entries.first(where: { !$0.isDirectory && $0.name.goTrimmed.lowercased() == wanted }) else { continue }
            let path = joinPath(directory, entry.name)
            guard fileSystem.status(path)?.kind == .regular,
                let bytes = try? fileSystem.read(path, limit: Self.fileBytes + 1)
            else { continue }
            let truncated = bytes.count > Self.fileBytes
            let text = InstructionText.sanitized(String(decoding: bytes.prefix(Self.fileBytes), as: UTF8.self))
            guard !text.isEmpty else { continue }
            parts.append(Part(type: "context-file", contextFilePath: path, contextFileContent: text, contextFileTruncated: truncated))
        }
        return parts
    }

    func skillParts() -> [Part] {
        let directories = ChatContextOptions.Configuration.resolve(configuration.skillsDirs, home: home, workingDirectory: workingDirectory)
        var seen = Set<String>()
        var parts: [Part] = []
        // Files examined, accepted or not: each costs a read of up to 64 KiB and a parse, so a
        // tree of thousands of mismatched skills must not cost them all on every request.
        var examined = 0
        for directory in directories {
            guard let listing = fileSystem.directoryEntries(directory, limit: directoryEntries) else { continue }
            for entry in listing.entries where entry.isDirectory {
                guard parts.count < Self.maxSkills, examined < Self.maxExaminedSkills else { return parts }
                examined += 1
                let skillDir = joinPath(directory, entry.name)
                let meta = joinPath(skillDir, configuration.skillMetaFile)
                guard fileSystem.status(meta)?.kind == .regular,
                    let bytes = try? fileSystem.read(meta, limit: Self.fileBytes),
                    let front = try? SkillFrontMatter.parse(utf8: bytes, readingBody: false),
                    front.name == entry.name, seen.insert(front.name).inserted
                else { continue }
                parts.append(
                    Part(
                        type: "skill", skillName: front.name, skillDescription: front.description, skillDir: skillDir,
                        skillMetaFile: configuration.skillMetaFile))
            }
        }
        return parts
    }
}
