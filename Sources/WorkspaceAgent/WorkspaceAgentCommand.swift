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
        discussion: """
            With no subcommand it runs the agent; see `workspace-agent run --help` for its options. \
            Shell completion: `workspace-agent --generate-completion-script bash|zsh|fish`. \
            Exit status: 0 after a graceful stop (SIGTERM, SIGINT or SIGHUP) and for --help and \
            --version; 64 for a usage error (an unknown flag, subcommand or value, or a setting the \
            agent cannot use, such as a state directory it cannot create); 1 when the agent cannot \
            start (a listener cannot bind), stops on an error, outlasts its shutdown bound or gets a \
            second terminating signal, and when an `exp` command (`exp sync`, `exp chat context`) fails (as the reference). \
            Run as `coder` (a link named so), the binary answers the reference's `coder agent` and \
            in-workspace commands: see `coder --help`.
            """,
        version: AgentVersion.description,
        subcommands: [RunCommand.self, ExpCommand.self, StatCommand.self, ExternalAuthCommand.self],
        defaultSubcommand: RunCommand.self
    )

    /// Parses, runs, and turns every error into one line on stderr and a non-zero exit.
    static func main() async {
        // The metadata commands first, before anything builds the command-line parser.
        if let status = StatFastPath.run(Array(CommandLine.arguments.dropFirst())) { Glibc.exit(status) }
        // git runs the binary as `GIT_ASKPASS` (one prompt argument) and as `GIT_SSH_COMMAND`
        // (`<binary> gitssh -- …`), under either name.
        await GitHelperMain.answerAskpassIfAsked()
        let words = Array(CommandLine.arguments.dropFirst())
        if words.first == "gitssh" {
            await GitHelperMain.gitSSH(Array(words.dropFirst()))
        }
        // Run as `coder` (the link beside the binary or in the scripts' bin dir), it answers the
        // reference's command line: `coder agent …` and the in-workspace commands; a bare
        // `coder` prints help and never starts a second agent.
        if invokedAsCoder {
            await CoderCommand.runMain(Array(CommandLine.arguments.dropFirst()))
        }
        if let (word, group) = unknownSubcommand(Array(CommandLine.arguments.dropFirst())) {
            writeAll(2, "workspace-agent: unknown subcommand '\(word)' for '\(group)'; see '\(group) --help'\n")
            Glibc.exit(ExitCode.validationFailure.rawValue)
        }
        do {
            try await parseAndRun(WorkspaceAgentCommand.self, emptyAssignmentsSplit(Array(CommandLine.arguments.dropFirst())))
        } catch let code as ExitCode {
            // The reason was already logged.
            Glibc.exit(code.rawValue)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                Glibc.exit(0)
            }
            let message = errorText(message(for: error), error)
            writeAll(2, "workspace-agent: \(message)\n")
            // `exp sync` exits 1 on any error, usage errors included, as the reference.
            let isExp = CommandLine.arguments.dropFirst().first == "exp"
            Glibc.exit(code.rawValue == 0 || isExp ? Int32(1) : code.rawValue)
        }
    }
}

extension WorkspaceAgentCommand {
    /// What an error prints: a command's own error whole (a reading that failed two ways lists
    /// both, as the reference prints them), the parser's first line only (its message goes on
    /// with the usage text).
    static func errorText(_ message: String, _ error: any Error) -> String {
        if message == "\(error)" { return message }
        return message.split(separator: "\n").first.map(String.init) ?? "\(error)"
    }

    /// Parses `words` as `root`'s command line and runs the command they name.
    static func parseAndRun(_ root: any ParsableCommand.Type, _ words: [String]) async throws {
        var command = try root.parseAsRoot(words)
        if var asyncCommand = command as? any AsyncParsableCommand {
            try await asyncCommand.run()
        } else {
            try command.run()
        }
    }

    /// The subcommands but `run`: what `coder` serves beside `coder agent`.
    static var helperCommands: [any ParsableCommand.Type] {
        configuration.subcommands.filter { ObjectIdentifier($0) != ObjectIdentifier(RunCommand.self) }
    }

    /// Whether the binary was started under the name `coder` (the scripts' link).
    static var invokedAsCoder: Bool {
        let name = CommandLine.arguments.first?.split(separator: "/").last ?? ""
        return name == "coder"
    }

    /// `--flag=` as `--flag ""`: ArgumentParser takes `--flag=` for a missing value, while
    /// an empty value means something for several flags (`--prometheus-address=` disables the
    /// listener, as `CODER_AGENT_PROMETHEUS_ADDRESS=` does). Words after `--` are left alone.
    static func emptyAssignmentsSplit(_ words: [String]) -> [String] {
        var out: [String] = []
        out.reserveCapacity(words.count)
        for (index, word) in words.enumerated() {
            if word == "--" {
                out += words[index...]
                break
            }
            if word.hasPrefix("--"), word.count > 3, word.hasSuffix("="), !word.dropLast().contains("=") {
                out += [String(word.dropLast()), ""]
            } else {
                out.append(word)
            }
        }
        return out
    }

    /// The first word that names no subcommand of a command group (`exp`, `exp sync`),
    /// with the group's full name; nil when the words name a command (or reach options,
    /// whose values cannot be told from words). The agent's own flags go to `run`, the
    /// default, so the top level only checks a first word that is not a flag (`coder` has no
    /// default: its first word must name one).
    static func unknownSubcommand(
        _ words: [String], root: any ParsableCommand.Type = WorkspaceAgentCommand.self, name rootName: String = "workspace-agent"
    ) -> (word: String, group: String)? {
        var command: any ParsableCommand.Type = root
        var name = rootName
        for word in words {
            guard !word.hasPrefix("-"), word != "help" else { return nil }
            let subcommands = command.configuration.subcommands
            guard !subcommands.isEmpty else { return nil }
            guard let next = subcommands.first(where: { $0._commandName == word }) else {
                // The top level runs `run` by default, which takes no words either.
                return (word, name)
            }
            command = next
            name += " " + word
        }
        return nil
    }
}

/// The agent's version, reported upward with a leading `v` by later capabilities.
enum AgentVersion {
    static let current = "0.1.0"
    /// `--version`: the version and the commit the binary was built from.
    static let description = "\(current) (commit \(BuildInfo.commit))"
}
