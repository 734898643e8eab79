import AgentCore
import HostStats
#if canImport(Glibc)
import Glibc
#endif

/// `stat cpu`, `stat mem` and `stat disk` with no flags but `--host` (what templates'
/// metadata blocks run every few seconds), answered before the command-line parser is built:
/// the parser's reflection over every command and option is most of a helper's start-up after
/// the loader. The figures come from the subcommands' own code. Any other form, and any
/// failure, takes the general path (which reports errors in the reference's words).
enum StatFastPath {
    /// The exit status when the words were answered here; nil otherwise.
    static func run(_ words: [String]) -> Int32? {
        guard words.count >= 2, words.count <= 3, words[0] == "stat" else { return nil }
        let host: Bool
        switch words.dropFirst(2).first {
        case nil: host = false
        case "--host" where words[1] != "disk": host = true
        default: return nil
        }
        guard let statter = try? HostStatter(fileSystem: RootedFileSystem.machine) else { return nil }
        let figure: StatResult?
        switch words[1] {
        case "cpu":
            guard let value = try? StatCPUCommand.figure(host: host, statter: statter) else { return nil }
            figure = value
        case "mem":
            guard let value = try? StatMemCommand.figure(host: host, scale: StatPrefix(parsing: "Gi"), statter: statter) else { return nil }
            figure = value
        case "disk":
            guard case .success(let value) = statter.disk(StatPrefix(parsing: "Gi"), path: "/") else { return nil }
            figure = value
        default:
            return nil
        }
        guard let text = try? formatFigure(figure, as: "text") else { return nil }
        writeAll(1, text + "\n")
        return 0
    }
}
