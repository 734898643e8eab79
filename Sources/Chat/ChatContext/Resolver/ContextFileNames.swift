/// The file names and places the resolver recognises (case-sensitive).
public enum ContextFileNames {
    /// Instruction files, at a root's top level.
    public static let instructionFiles: Set<String> = ["AGENTS.md", "CLAUDE.md", ".cursorrules"]
    /// The MCP configuration, at a root's top level.
    public static let mcpConfig = ".mcp.json"
    /// The file that makes a directory a skill.
    public static let skillMeta = "SKILL.md"
    /// Where skills live under a root: each immediate subdirectory with a SKILL.md is one.
    public static let skillContainers = ["skills", ".agents/skills", ".claude/skills", ".codex/skills"]
}
