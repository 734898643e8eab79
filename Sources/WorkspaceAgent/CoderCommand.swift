import AgentCore
import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif

/// `coder`: the binary under the reference's name (a `coder` link beside it, as a template's
/// bootstrap names the agent): `coder agent` runs the agent, and the in-workspace commands
/// (`coder exp …` and the others of `workspace-agent`) talk to it.
struct CoderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coder",
        abstract: "The workspace agent under the reference's name: `coder agent` runs it; the other subcommands are the in-workspace commands.",
        discussion: """
            `coder agent` takes the flags of `workspace-agent run` and the reference's agent \
            flags (--agent-url, --auth, --agent-token, --agent-token-file, --agent-name, \
            --agent-header, --agent-header-command, and their CODER_AGENT_* variables); \
            CODER_AGENT_URL is required. Exit status: 0, or 1 \
            on any error (as the reference).
            """,
        version: AgentVersion.description,
        subcommands: [CoderAgentCommand.self] + WorkspaceAgentCommand.helperCommands
    )
}

/// `coder agent`: the agent with the reference's rules for its settings.
struct CoderAgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Start the workspace agent (the reference's `coder agent`): the flags of `workspace-agent run`; CODER_AGENT_URL is required."
    )

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        try await daemon.run(as: .coderAgent)
    }
}

/// A `coder` command's error, printed as the reference's CLI prints one.
struct CoderCommandFailure: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}

extension CoderCommand {
    /// Parses and runs a `coder …` command line; any error is 1, printed as the reference's
    /// `Encountered an error running "coder agent", …` and `error: <message>` lines.
    static func runMain(_ arguments: [String]) async -> Never {
        let words = WorkspaceAgentCommand.emptyAssignmentsSplit(arguments)
        if let (word, group) = WorkspaceAgentCommand.unknownSubcommand(words, root: CoderCommand.self, name: "coder") {
            writeAll(2, "coder: unknown subcommand '\(word)' for '\(group)'; see '\(group) --help'\n")
            Glibc.exit(1)
        }
        do {
            try await WorkspaceAgentCommand.parseAndRun(CoderCommand.self, words)
        } catch let code as ExitCode {
            // The reason was already printed or logged.
            Glibc.exit(code.rawValue)
        } catch let failure as CoderCommandFailure {
            fail(failure.description, words)
        } catch {
            if exitCode(for: error) == .success {
                print(fullMessage(for: error))
                Glibc.exit(0)
            }
            fail(WorkspaceAgentCommand.errorText(message(for: error), error), words)
        }
        Glibc.exit(0)
    }

    /// The reference's two lines (`cli/root.go` `formatRunCommandError`), exit status 1.
    static func fail(_ message: String, _ words: [String]) -> Never {
        let name = commandName(words)
        writeAll(2, "Encountered an error running \"\(name)\", see \"\(name) --help\" for more information\nerror: \(message)\n")
        Glibc.exit(1)
    }

    /// `coder` and the subcommands `words` name (`coder agent`, `coder exp sync start`).
    static func commandName(_ words: [String]) -> String {
        // The git helpers are the reference's hidden subcommands, run before argument parsing.
        if let first = words.first, GitHelperMain.commandNames.contains(first) { return "coder " + first }
        var command: any ParsableCommand.Type = CoderCommand.self
        var name = "coder"
        for word in words {
            guard !word.hasPrefix("-"), let next = command.configuration.subcommands.first(where: { $0._commandName == word }) else { break }
            command = next
            name += " " + word
        }
        return name
    }
}
