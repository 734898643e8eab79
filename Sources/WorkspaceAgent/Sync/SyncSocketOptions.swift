import AgentCore
import AgentSocket
import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// `--socket-path`, shared by every `exp sync` subcommand (env CODER_AGENT_SOCKET_PATH; empty
/// means the default, as in the reference).
struct SyncSocketOptions: ParsableArguments {
    @Option(name: .long, help: "Agent socket path. Env CODER_AGENT_SOCKET_PATH. Default \(AgentSocketOptions.defaultPath).")
    var socketPath: String?

    var client: AgentSocketClient {
        let chosen = socketPath ?? ProcessInfo.processInfo.environment["CODER_AGENT_SOCKET_PATH"]
        return AgentSocketClient(path: AgentSocketOptions.path(chosen))
    }
}

/// Runs a subcommand's body: its error goes to stderr as `error: <message>` (every line of
/// it) and the exit status is 1, as in the reference.
func runSync(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as SyncFailure {
        writeAll(2, "error: \(error.description)\n")
        throw ExitCode(1)
    }
}

/// A subcommand's failure: what the user reads.
struct SyncFailure: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }

    /// `<what>: <cause>`, as the reference wraps errors; a dial failure reads the same
    /// whatever the call.
    init(_ what: String, _ cause: any Error) {
        if let failure = cause as? AgentSocketClient.Failure, case .dial = failure {
            description = failure.description
        } else {
            description = "\(what): \(cause)"
        }
    }
}

/// Go's `%q` for a unit name, and `[a, b]` for a list of them.
func quoted(_ unit: String) -> String { goQuote(unit) }
func bracketed(_ units: [String]) -> String { "[" + units.joined(separator: ", ") + "]" }

/// Writes a line to stdout at once (unbuffered, so that output and errors keep their order
/// when both go to one file).
func emit(_ text: String) {
    writeAll(1, text + "\n")
}
