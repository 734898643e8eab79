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
        let directory = FileManager.default.currentDirectoryPath
        let argv = ["/bin/sh", "-c", command]
        var options = ChildCapture.Options(maxOutput: maxOutputBytes, timeout: timeout)
        options.killOnOverflow = true
        // On the shared child reactor; empty stdin, as Go's exec gives a command without one.
        let result = ChildCapture.runBlocking(
            ChildSpec(
                executable: argv[0], arguments: argv, environment: ChildSpec.environment(childEnvironment), directory: directory,
                grouping: .newSession),
            options: options)
        if let failed = result.failure { throw failure(failed.description(executable: argv[0], directory: directory)) }
        if result.timedOut { throw failure("timed out after \(timeout)") }
        if result.overflowed { throw failure("output larger than \(maxOutputBytes >> 10) KiB") }
        let status = result.status ?? 0
        let signal = status & 0x7f
        if signal != 0 { throw failure("signal: \(signalName(signal))") }
        let code = (status >> 8) & 0xff
        if code != 0 { throw failure("exit status \(code)") }
        return AgentHeaders.lines(result.output)
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
