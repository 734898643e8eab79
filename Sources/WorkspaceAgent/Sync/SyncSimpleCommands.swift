import AgentSocket
import ArgumentParser

/// `exp sync ping`: prints `Success` when the agent socket answers.
struct SyncPingCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ping", abstract: "Check that the agent socket answers.")

    @OptionGroup var socket: SyncSocketOptions

    func run() async throws {
        try await runSync {
            do { try await socket.client.ping() } catch { throw SyncFailure("ping failed", error) }
            emit("Success")
        }
    }
}

/// `exp sync want <unit> <depends-on>...`: declares that `unit` waits for each dependency
/// to complete.
struct SyncWantCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "want", abstract: "Declare that a unit depends on other units completing.",
        usage: "workspace-agent exp sync want <unit> <depends-on> ... [--socket-path <socket-path>]")

    @OptionGroup var socket: SyncSocketOptions
    @Argument(help: ArgumentHelp("The unit, then the units it depends on.", valueName: "unit")) var units: [String] = []

    func run() async throws {
        try await runSync {
            guard units.count >= 2 else {
                throw SyncFailure("at least two arguments are required: unit and one or more depends-on")
            }
            let unit = units[0]
            let client = socket.client
            for dependency in units.dropFirst() {
                do { try await client.syncWant(unit, dependsOn: dependency) } catch {
                    throw SyncFailure("declare dependency failed", error)
                }
            }
            emit("Unit \(quoted(unit)) declared dependencies: \(bracketed(Array(units.dropFirst())))")
        }
    }
}

/// `exp sync complete <unit>`: marks the unit completed.
struct SyncCompleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "complete", abstract: "Mark a unit completed (registered first by want or start).",
        usage: "workspace-agent exp sync complete <unit> [--socket-path <socket-path>]")

    @OptionGroup var socket: SyncSocketOptions
    /// Exactly one (the reference's message when not); an array so that message is ours.
    @Argument(help: ArgumentHelp("The unit.", valueName: "unit")) var units: [String] = []

    func run() async throws {
        try await runSync {
            guard units.count == 1 else { throw SyncFailure("exactly one unit name is required") }
            do { try await socket.client.syncComplete(units[0]) } catch { throw SyncFailure("complete unit failed", error) }
            emit("Success")
        }
    }
}
