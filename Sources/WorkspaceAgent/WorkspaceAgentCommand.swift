import AgentCore
import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// `workspace-agent`: the daemon. With no subcommand it runs the agent (`run`).
@main
struct WorkspaceAgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "workspace-agent",
        abstract: "The workspace agent: process API and local services for a developer workspace.",
        discussion: "With no subcommand it runs the agent; see `workspace-agent run --help` for its options.",
        version: AgentVersion.current,
        subcommands: [RunCommand.self, ExpCommand.self],
        defaultSubcommand: RunCommand.self
    )

    /// Parses, runs, and turns every error into one line on stderr and a non-zero exit.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let code as ExitCode {
            // The reason was already logged.
            Glibc.exit(code.rawValue)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                Glibc.exit(0)
            }
            let message = message(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
            writeAll(2, "workspace-agent: \(message)\n")
            // `exp sync` exits 1 on any error, usage errors included, as the reference.
            let isExp = CommandLine.arguments.dropFirst().first == "exp"
            Glibc.exit(code.rawValue == 0 || isExp ? Int32(1) : code.rawValue)
        }
    }
}

/// The agent's version, reported upward with a leading `v` by later capabilities.
enum AgentVersion {
    static let current = "0.1.0"
}
