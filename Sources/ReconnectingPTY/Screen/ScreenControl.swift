import AgentCore
#if canImport(Glibc)
import Glibc
#endif

/// Runs `screen -x <name> -c <config> -X <command>` against one of the agent's screen
/// sessions (by the name it gave it) and reads what screen says, on the shared child reactor.
///
/// Bounds: one command at most ``commandTimeout`` (then it is killed), ``maxOutput`` bytes
/// of its output kept.
struct ScreenControl: Sendable {
    /// A screen that has not answered within this is killed (the reference bounds the
    /// whole poll only).
    static let commandTimeout: Duration = .seconds(10)
    /// Output kept from one command (screen's messages are a line).
    static let maxOutput = 4096

    let program: String
    let name: String
    let directory: ScreenDirectory
    let environment: [String: String]
    let workingDirectory: String

    enum Reply: Equatable, Sendable {
        case done
        /// Screen says the session does not exist (`No screen session found.`).
        case noSession
        case failed(String)
    }

    /// Runs `command` once, on the shared child reactor (no thread of its own).
    func run(_ command: String) async -> Reply {
        var options = ChildCapture.Options(maxOutput: Self.maxOutput, mergeErrors: true, timeout: Self.commandTimeout)
        options.killScope = .process
        let argv = [program, "-x", name, "-c", directory.config, "-X", command]
        let result = await ChildCapture.run(
            ChildSpec(
                executable: program, arguments: argv, environment: ChildSpec.environment(environment), directory: workingDirectory,
                grouping: .newSession),
            options: options)
        guard let status = result.status else {
            return .failed(result.failure?.description(executable: program, directory: workingDirectory) ?? "start failed")
        }
        let text = String(decoding: result.output, as: UTF8.self).trimmingWhitespace()
        if status == 0 { return .done }
        if text.contains("No screen session found") { return .noSession }
        return .failed(text.isEmpty ? "exit status \(status >> 8 & 0xff)" : text)
    }

    /// Runs `command` until `isDone` accepts screen's reply, by ``ScreenCommandPoll`` and at
    /// most its limit of wall-clock time; `stop` is asked before each run and ends the poll
    /// early. `pause` waits between runs. Returns the last reply.
    func poll(
        _ command: String, until isDone: @Sendable (Reply) -> Bool,
        pause: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }, stop: @Sendable () async -> Bool = { false }
    ) async -> Reply {
        var poll = ScreenCommandPoll()
        // Commands that each take their whole time must not stretch the poll past its limit.
        let deadline = ContinuousClock.now + ScreenCommandPoll.limit
        while true {
            if await stop() { return .failed("stopped") }
            let reply = await run(command)
            if isDone(reply) { return reply }
            guard ContinuousClock.now < deadline else { return reply }
            switch poll.failed() {
            case .retry(let duration):
                guard (try? await pause(duration)) != nil else { return reply }
            case .giveUp:
                return reply
            }
        }
    }

    /// Quits the session: `quit` until screen says there is no such session (it answers a
    /// quit before acting on it, so one answered quit is not yet a session gone).
    func quit() async -> Reply {
        await poll("quit", until: { $0 == .noSession })
    }
}
