import AgentCore
import AgentRPC
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// `--agent-header-command`: run once at start as `sh -c <command>` with the agent's environment
/// plus `CODER_URL`, stdin empty, stderr read and discarded; its stdout's lines are headers.
enum AgentHeaderCommand {
    /// More output than this fails the command (headers are a few lines).
    static let maxOutputBytes = 64 << 10
    /// A command still running after this is killed (its whole process group) and fails.
    static let timeout: Duration = .seconds(30)

    /// The reference's `failed to run [sh -c <command>]: <reason>`.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The output's lines (``AgentHeaders/lines(_:)``); throws when the command cannot start,
    /// exits other than 0, is killed, prints too much or runs too long. Blocks the caller: it
    /// runs once, at start, before the agent serves anything.
    static func run(_ command: String, environment: [String: String], url: String, timeout: Duration = timeout) throws(Failure) -> [String] {
        func failure(_ reason: String) -> Failure { Failure(description: "failed to run [sh -c \(command)]: \(reason)") }
        var childEnvironment = environment
        childEnvironment["CODER_URL"] = url
        let process: SessionProcess
        do {
            process = try SessionProcess.spawn(
                argv: ["/bin/sh", "-c", command], environment: { _ in childEnvironment },
                directory: FileManager.default.currentDirectoryPath, terminal: nil)
        } catch {
            throw failure(error.description)
        }
        // Empty stdin, as Go's exec gives a command without one.
        close(process.input)
        defer {
            close(process.output)
            close(process.errors)
        }
        var output: [UInt8] = []
        var open: [Int32] = [process.output, process.errors]
        let deadline = ContinuousClock.now + timeout
        var reason: String?
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !open.isEmpty, reason == nil {
            let left = deadline - .now
            guard left > .zero else { reason = "timed out after \(timeout)"; break }
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let milliseconds = Int32(min(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1, 1000))
            let ready = poll(&fds, nfds_t(fds.count), milliseconds)
            if ready < 0, errno != EINTR { reason = SystemCallError.message(errno); break }
            for descriptor in fds where descriptor.revents != 0 {
                let n = buffer.withUnsafeMutableBytes { read(descriptor.fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    // Stderr is discarded; stdout kept up to its bound.
                    guard descriptor.fd == process.output else { continue }
                    output += buffer[0..<n]
                    if output.count > maxOutputBytes { reason = "output larger than \(maxOutputBytes >> 10) KiB" }
                } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                    open.removeAll { $0 == descriptor.fd }
                }
            }
        }
        if reason != nil { process.signalGroup(SIGKILL) }
        let status = process.waitForExit()
        if let reason { throw failure(reason) }
        let signal = status & 0x7f
        if signal != 0 { throw failure("signal: \(signalName(signal))") }
        let code = (status >> 8) & 0xff
        if code != 0 { throw failure("exit status \(code)") }
        return AgentHeaders.lines(output)
    }

    /// Go's words for the common signals; others by number.
    static func signalName(_ signal: Int32) -> String {
        switch signal {
        case SIGKILL: "killed"
        case SIGTERM: "terminated"
        case SIGINT: "interrupt"
        case SIGHUP: "hangup"
        case SIGSEGV: "segmentation fault"
        case SIGABRT: "aborted"
        default: "signal \(signal)"
        }
    }
}
