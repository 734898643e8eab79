import AgentCore
import ArgumentParser
import HostStats

/// `stat cpu`: cores used over a 100 ms sample; the container's when containerized,
/// unless `--host`.
struct StatCPUCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "cpu", abstract: "Show CPU usage, in cores.")

    @Flag(help: "Force host CPU measurement.") var host = false
    @OptionGroup var common: StatCommonOptions

    func run() throws {
        let format = try common.format(among: ["text", "json"])
        print(try formatFigure(try Self.figure(host: host, statter: try common.statter()), as: format))
    }

    /// The figure: the container's when containerized (as found when the statter was made),
    /// unless `host`.
    static func figure(host: Bool, statter: HostStatter) throws -> StatResult? {
        let containerized = statter.containerizedAtStart
        return containerized && !host ? try statter.containerCPU().orFail() : try statter.hostCPU().orFail()
    }
}

/// `stat mem`: memory used of the limit; the container's when containerized, unless `--host`.
struct StatMemCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "mem", abstract: "Show memory usage, in gigabytes.")

    @Flag(help: "Force host memory measurement.") var host = false
    @Option(help: ArgumentHelp("SI Prefix for memory measurement.", valueName: "Ki|Mi|Gi|Ti")) var prefix = "Gi"
    @OptionGroup var common: StatCommonOptions

    func run() throws {
        let format = try common.format(among: ["text", "json"])
        let scale = try parsePrefix(prefix)
        print(try formatFigure(try Self.figure(host: host, scale: scale, statter: try common.statter()), as: format))
    }

    /// The figure: the container's when containerized (as found when the statter was made),
    /// unless `host`.
    static func figure(host: Bool, scale: StatPrefix, statter: HostStatter) throws -> StatResult? {
        let containerized = statter.containerizedAtStart
        return containerized && !host ? try statter.containerMemory(scale).orFail() : try statter.hostMemory(scale).orFail()
    }
}

/// `stat disk [path]`: the file system holding the path (default `/`), by `statfs`.
struct StatDiskCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "disk", abstract: "Show disk usage, in gigabytes.")

    @Option(help: "Path for which to check disk usage.") var path = "/"
    @Option(help: ArgumentHelp("SI Prefix for disk measurement.", valueName: "Ki|Mi|Gi|Ti")) var prefix = "Gi"
    @OptionGroup var common: StatCommonOptions
    /// A path given as a word wins over `--path`.
    @Argument(help: ArgumentHelp("Path for which to check disk usage (instead of --path).", valueName: "path"))
    var words: [String] = []

    func run() throws {
        let format = try common.format(among: ["text", "json"])
        let scale = try parsePrefix(prefix)
        let path = words.first ?? path
        let statter = try common.statter()
        switch statter.disk(scale, path: path) {
        case .success(let result): print(try formatFigure(result, as: format))
        case .failure(let error) where error.notFound: throw StatFailure("not found: \(goQuote(path))")
        case .failure(let error): throw StatFailure("\(error)")
        }
    }
}
