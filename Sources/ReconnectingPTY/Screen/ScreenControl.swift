import AgentCore
#if canImport(Glibc)
import Glibc
#endif

/// Runs `screen -x <name> -c <config> -X <command>` against one of the agent's screen
/// sessions (by the name it gave it) and reads what screen says, on a thread of its own.
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

    /// Runs `command` once.
    func run(_ command: String) async -> Reply {
        await withCheckedContinuation { continuation in
            AgentThread.start(name: "screen-x") { continuation.resume(returning: runBlocking(command)) }
        }
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

    private func runBlocking(_ command: String) -> Reply {
        let process: SessionProcess
        do throws(SessionProcess.SpawnError) {
            process = try SessionProcess.spawn(
                argv: [program, "-x", name, "-c", directory.config, "-X", command], environment: { _ in environment },
                directory: workingDirectory, terminal: nil)
        } catch {
            return .failed(error.description)
        }
        close(process.input)
        var output: [UInt8] = []
        var open = [process.output, process.errors]
        let deadline = ContinuousClock.now + Self.commandTimeout
        var buffer = [UInt8](repeating: 0, count: 1024)
        while !open.isEmpty {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else {
                process.signalChild(SIGKILL)
                break
            }
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let milliseconds = Int32(clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1)
            let ready = Glibc.poll(&fds, nfds_t(fds.count), milliseconds)
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { continue }
            for entry in fds where entry.revents != 0 {
                let n = read(entry.fd, &buffer, buffer.count)
                if n > 0 {
                    output.append(contentsOf: buffer[..<min(n, max(0, Self.maxOutput - output.count))])
                } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                    open.removeAll { $0 == entry.fd }
                }
            }
        }
        close(process.output)
        close(process.errors)
        let status = process.waitForExit()
        let text = String(decoding: output, as: UTF8.self).trimmingWhitespace()
        if status == 0 { return .done }
        if text.contains("No screen session found") { return .noSession }
        return .failed(text.isEmpty ? "exit status \(status >> 8 & 0xff)" : text)
    }
}
