import AgentCore
import AgentSystem
import FoundationEssentials
import GitCredentials
#if canImport(Glibc)
import Glibc
#endif

/// The two ways git runs the binary: as `GIT_ASKPASS` (one prompt argument and `GIT_PREFIX`
/// set) and as `GIT_SSH_COMMAND` (`<binary> gitssh -- <ssh arguments>`).
enum GitHelperMain {
    /// The reference's names for them (its hidden subcommands), which its error texts carry.
    static let commandNames: Set<String> = ["gitaskpass", "gitssh"]

    /// Answers git's prompt and exits when this run is one (the reference's check); returns
    /// otherwise.
    static func answerAskpassIfAsked() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        guard arguments.count == 1, arguments[0].hasPrefix("Username ") || arguments[0].hasPrefix("Password ") else { return }
        let environment = ProcessInfo.processInfo.environment
        guard AskpassPrompt.isAskpass(arguments: arguments, environmentNames: environment.keys) else { return }
        let client: any CoderRESTRequesting
        do {
            client = try AgentClientEnvironment.coderAPI(environment: environment)
        } catch {
            CoderCommand.fail("create agent client: \(error.description)", ["gitaskpass"])
        }
        var askpass = GitAskpass(api: client)
        askpass.chatID = environment["CODER_CHAT_ID"] ?? ""
        askpass.chatAgent = environment["CODER_CHAT_AGENT"] == "true"
        askpass.readRepositoryHints()
        do {
            let answer = try await askpass.run(prompt: arguments[0]) { writeAll(2, $0) }
            writeAll(1, answer + "\n")
            exit(0)
        } catch .silent {
            exit(1)
        } catch {
            CoderCommand.fail(error.description, ["gitaskpass"])
        }
    }

    /// `gitssh -- <ssh arguments>`: with a control plane, ssh with the Coder git key after the
    /// user's keys; standalone (no `CODER_AGENT_URL`) plain `ssh`, so clones over SSH still
    /// work with the user's own keys.
    static func gitSSH(_ words: [String]) async -> Never {
        let arguments = words.first == "--" ? Array(words.dropFirst()) : words
        let environment = ProcessInfo.processInfo.environment
        guard let url = environment["CODER_AGENT_URL"], !url.isEmpty else {
            withCStrings(["ssh"] + arguments) { argv in _ = execvp("ssh", argv) }
            writeAll(2, "gitssh: exec ssh: \(String(cString: strerror(errno)))\n")
            exit(1)
        }
        let client: any CoderRESTRequesting
        do {
            client = try AgentClientEnvironment.coderAPI(environment: environment)
        } catch {
            CoderCommand.fail("create agent client: \(error.description)", ["gitssh"])
        }
        let home = SessionCommand.homeDirectory(environment: environment)
        do {
            try await GitSSH.run(arguments: arguments, api: client, home: home) { writeAll(2, $0) }
            exit(0)
        } catch {
            CoderCommand.fail(error.description, ["gitssh"])
        }
    }
}
