import AgentCore
import AgentProto
import AgentSocket
import ArgumentParser

/// `exp sync start <unit>`: waits until every dependency of the unit is satisfied, then
/// marks it started.
///
/// It waits through the agent's `SyncWaitReady` extension, which answers as soon as the
/// unit is ready; against an agent without it (the reference), it polls SyncReady every
/// second as the reference's CLI does.
struct SyncStartCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "start", abstract: "Wait for a unit's dependencies, then mark it started.",
        usage: "workspace-agent exp sync start <unit> [--timeout <timeout>] [--socket-path <socket-path>]")

    @OptionGroup var socket: SyncSocketOptions
    /// Exactly one (the reference's message when not); an array so that message is ours.
    @Argument(help: ArgumentHelp("The unit.", valueName: "unit")) var units: [String] = []
    @Option(name: .long, help: "How long to wait for dependencies (Go duration; 0 waits forever). Default 5m.")
    var timeout: String = "5m"

    /// The reference's polling interval, used against an agent without the extension.
    static let pollInterval: Duration = .seconds(1)

    func run() async throws {
        try await runSync {
            guard units.count == 1 else { throw SyncFailure("exactly one unit name is required") }
            let unit = units[0]
            let limit: Duration
            do { limit = try GoDuration.parse(timeout) } catch {
                throw SyncFailure("invalid argument \(quoted(timeout)) for \"--timeout\" flag: \(error)")
            }
            // The deadline covers the dial and every call, as in the reference.
            let deadline = limit > .zero ? ContinuousClock.now + limit : nil
            let client = socket.client

            let status: SyncStatusSnapshot
            do {
                guard let got = try await Self.before(deadline, { try await client.syncStatus(unit) }) else {
                    throw SyncFailure("get status failed: context deadline exceeded")
                }
                status = SyncStatusSnapshot(got)
            } catch let error as AgentSocketClient.Failure {
                throw SyncFailure("get status failed", error)
            }
            if !status.isReady {
                emit("Unit \(quoted(unit)) is waiting for dependencies to be satisfied: \(bracketed(status.unsatisfied))")
                let waited: Void? = try await Self.before(deadline) { try await Self.waitReady(unit, client: client) }
                guard waited != nil else {
                    throw SyncFailure("timeout waiting for dependencies of unit '\(unit)'")
                }
            }
            do {
                guard try await Self.before(deadline, { try await client.syncStart(unit) }) != nil else {
                    throw SyncFailure("start unit failed: context deadline exceeded")
                }
            } catch let error as AgentSocketClient.Failure {
                throw SyncFailure("start unit failed", error)
            }
            if status.dependencies.isEmpty {
                emit("Unit \(quoted(unit)) started with no dependencies")
            } else if status.isReady {
                emit("Unit \(quoted(unit)) started immediately, dependencies already satisfied: \(bracketed(status.dependencies))")
            } else {
                emit("Unit \(quoted(unit)) finished waiting for dependencies: \(bracketed(status.unsatisfied))")
            }
        }
    }

    /// Waits through the extension; polls against an agent without it.
    static func waitReady(_ unit: String, client: AgentSocketClient) async throws {
        do {
            try await client.waitReady(unit)
            return
        } catch  where error.isUnsupported || error.isTransportFailure {
            // An agent without the extension, or the wait's connection was lost: poll as
            // the reference does (a poll that fails then reports why).
        } catch {
            throw SyncFailure("error checking dependencies: sync ready: \(error)")
        }
        while true {
            try await Task.sleep(for: pollInterval)
            let ready: Bool
            do { ready = try await client.syncReady(unit) } catch {
                throw SyncFailure("error checking dependencies: sync ready: \(error)")
            }
            if ready { return }
        }
    }

    /// `body`'s result, or nil when `deadline` passes first (nil deadline: no limit).
    static func before<T: Sendable>(
        _ deadline: ContinuousClock.Instant?, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T? {
        guard let deadline else { return try await body() }
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(until: deadline, clock: .continuous)
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }
}

/// What `start` needs of a SyncStatus answer: readiness and the dependencies, sorted.
struct SyncStatusSnapshot: Sendable {
    var isReady: Bool
    var dependencies: [String]
    var unsatisfied: [String]

    init(_ response: Coder_Agentsocket_V1_SyncStatusResponse) {
        isReady = response.isReady
        dependencies = response.dependencies.map(\.dependsOn).sorted()
        unsatisfied = response.dependencies.filter { !$0.isSatisfied }.map(\.dependsOn).sorted()
    }
}
