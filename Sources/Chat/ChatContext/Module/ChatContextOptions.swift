import AgentCore
import ArgumentParser

/// The chat context's flags and their environment twins (the reference's variable names).
/// Each list is comma-separated; entries are trimmed, `~` expanded, relative ones joined to
/// the working directory, and empty ones dropped. They seed the context manager's sources.
public struct ChatContextOptions: ParsableArguments {
    @Option(name: .long, help: "Instruction directories (comma list). Env CODER_AGENT_EXP_INSTRUCTIONS_DIRS. Default ~/.coder.")
    public var expInstructionsDirs: String?

    @Option(name: .long, help: "The instruction file the legacy context-config route reads. Env CODER_AGENT_EXP_INSTRUCTIONS_FILE. Default AGENTS.md.")
    public var expInstructionsFile: String?

    @Option(name: .long, help: "Skill directories (comma list). Env CODER_AGENT_EXP_SKILLS_DIRS. Default ~/.coder/skills,.agents/skills.")
    public var expSkillsDirs: String?

    @Option(name: .long, help: "A skill's file for the legacy context-config route. Env CODER_AGENT_EXP_SKILL_META_FILE. Default SKILL.md.")
    public var expSkillMetaFile: String?

    @Option(name: .long, help: "MCP configuration files (comma list). Env CODER_AGENT_EXP_MCP_CONFIG_FILES. Default .mcp.json.")
    public var expMcpConfigFiles: String?

    public init() {}

    /// The variables read here; the executable removes them from what children inherit.
    public static let variables = [
        "CODER_AGENT_EXP_INSTRUCTIONS_DIRS", "CODER_AGENT_EXP_INSTRUCTIONS_FILE", "CODER_AGENT_EXP_SKILLS_DIRS",
        "CODER_AGENT_EXP_SKILL_META_FILE", "CODER_AGENT_EXP_MCP_CONFIG_FILES",
    ]

    /// The resolved settings: raw list entries (resolved against the working directory
    /// when it is known) and the two legacy file names.
    public struct Configuration: Sendable, Equatable {
        public var instructionsDirs: [String]
        public var instructionsFile: String
        public var skillsDirs: [String]
        public var skillMetaFile: String
        public var mcpConfigFiles: [String]

        public init(
            instructionsDirs: [String] = ["~/.coder"], instructionsFile: String = "AGENTS.md",
            skillsDirs: [String] = ["~/.coder/skills", ".agents/skills"], skillMetaFile: String = "SKILL.md",
            mcpConfigFiles: [String] = [".mcp.json"]
        ) {
            self.instructionsDirs = instructionsDirs
            self.instructionsFile = instructionsFile
            self.skillsDirs = skillsDirs
            self.skillMetaFile = skillMetaFile
            self.mcpConfigFiles = mcpConfigFiles
        }

        /// Every list entry as a path: `~` and `~/…` expanded with `home`, absolute kept,
        /// relative joined to `workingDirectory`; empty entries dropped.
        public static func resolve(_ entries: [String], home: String, workingDirectory: String) -> [String] {
            ConfiguredPaths.resolve(entries, home: home, workingDirectory: workingDirectory)
        }

        /// The sources the lists seed, in order (instruction dirs, skill dirs, MCP files),
        /// each once.
        public func seeds(home: String, workingDirectory: String) -> [String] {
            var seen = Set<String>()
            return
                (Self.resolve(instructionsDirs, home: home, workingDirectory: workingDirectory)
                + Self.resolve(skillsDirs, home: home, workingDirectory: workingDirectory)
                + Self.resolve(mcpConfigFiles, home: home, workingDirectory: workingDirectory))
                .filter { seen.insert($0).inserted }
        }
    }

    public func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        func list(_ flag: String?, _ name: String, _ variable: String, _ fallback: [String]) throws(ConfigurationError) -> [String] {
            guard let text = try settings.string(flag, flag: name, variable: variable), !text.goTrimmed.isEmpty else { return fallback }
            return text.split(separator: ",", omittingEmptySubsequences: false).map { String($0).goTrimmed }
        }
        func name(_ flag: String?, _ option: String, _ variable: String, _ fallback: String) throws(ConfigurationError) -> String {
            let text = try settings.string(flag, flag: option, variable: variable)?.goTrimmed ?? ""
            return text.isEmpty ? fallback : text
        }
        let defaults = Configuration()
        return Configuration(
            instructionsDirs: try list(expInstructionsDirs, "--exp-instructions-dirs", "CODER_AGENT_EXP_INSTRUCTIONS_DIRS", defaults.instructionsDirs),
            instructionsFile: try name(expInstructionsFile, "--exp-instructions-file", "CODER_AGENT_EXP_INSTRUCTIONS_FILE", defaults.instructionsFile),
            skillsDirs: try list(expSkillsDirs, "--exp-skills-dirs", "CODER_AGENT_EXP_SKILLS_DIRS", defaults.skillsDirs),
            skillMetaFile: try name(expSkillMetaFile, "--exp-skill-meta-file", "CODER_AGENT_EXP_SKILL_META_FILE", defaults.skillMetaFile),
            mcpConfigFiles: try list(expMcpConfigFiles, "--exp-mcp-config-files", "CODER_AGENT_EXP_MCP_CONFIG_FILES", defaults.mcpConfigFiles))
    }
}
