import AgentCore
import ArgumentParser
import FoundationEssentials
import GitCredentials
#if canImport(Glibc)
import Glibc
#endif

/// `external-auth` (Coder's `coder external-auth`): tokens of the deployment's external
/// auth providers for the workspace's owner.
struct ExternalAuthCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "external-auth",
        abstract: "Manage external authentication.",
        discussion: "Authenticate with external services inside of a workspace.",
        subcommands: [ExternalAuthAccessTokenCommand.self]
    )
}

/// `external-auth access-token <provider>`: the token on stdout without a newline, exit 0;
/// without a valid token the URL to authenticate at, exit 1.
struct ExternalAuthAccessTokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "access-token",
        abstract: "Print auth for an external provider.",
        discussion: """
            Print an access-token for an external auth provider. The access-token will be \
            validated and sent to stdout with exit code 0. If a valid access-token cannot be \
            obtained, the URL to authenticate will be sent to stdout with exit code 1. \
            Example: OUTPUT=$(coder external-auth access-token github) || echo "Please authenticate: $OUTPUT"
            """
    )

    @Argument(help: "The external auth provider's ID.")
    var provider: String

    @Option(name: .long, help: "Extract a field from the \"extra\" properties of the OAuth token.")
    var extra: String = ""

    @Option(name: [.customShort("o"), .long], help: "Output format (text or json).")
    var output: String = "text"

    @Option(name: .customLong("agent-url"), help: "URL for an agent to access your deployment. Env CODER_AGENT_URL.")
    var agentURL: String?

    @Option(name: .long, help: "An agent authentication token. Env CODER_AGENT_TOKEN.")
    var agentToken: String?

    @Option(name: .long, help: "A file containing an agent authentication token. Env CODER_AGENT_TOKEN_FILE.")
    var agentTokenFile: String?

    func run() async throws {
        guard output == "text" || output == "json" else {
            throw CoderCommandFailure("invalid choice: \(goQuote(output)), should be one of \"text\", \"json\"")
        }
        let environment = ProcessInfo.processInfo.environment
        guard AgentClientEnvironment.hasCredentials(token: agentToken, tokenFile: agentTokenFile, environment: environment) else {
            writeAll(2, "No agent token found, this command must be run from inside a running workspace.\n")
            throw CoderCommandFailure("agent token not found")
        }
        let client: any CoderRESTRequesting
        do {
            client = try AgentClientEnvironment.coderAPI(url: agentURL, token: agentToken, tokenFile: agentTokenFile, environment: environment)
        } catch {
            throw CoderCommandFailure("create agent client: \(error.description)")
        }
        let result: ExternalAuthAccessToken.Output
        do {
            result = try await ExternalAuthAccessToken.run(provider: provider, extra: extra, json: output == "json", api: client)
        } catch {
            throw CoderCommandFailure(error.description)
        }
        writeAll(1, result.text)
        if result.failed { throw ExitCode(1) }
    }
}
