import AgentCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Runs one metadata key's command: the scripts' shell, shebang rule,
/// working directory and environment without the `CODER_SCRIPT_*` variables; stdout and
/// stderr into one buffer of at most 10 KiB; at the timeout the whole group is killed at
/// once. The value is the output as it is (not trimmed); the error is the reference's
/// `run cmd: …` / `create cmd: …` / `start cmd: …` text, or empty.
enum MetadataCommand {
    /// Output kept per collection; more is cut with a note in the error.
    static let maxOutputBytes = 10_240

    static func collect(script: String, timeout: Duration, context: ScriptCommand.Context) async -> (value: String, error: String) {
        let command: ScriptCommand
        do {
            command = try ScriptCommand.make(script: script, context: context, dataDirectory: nil)
        } catch {
            return ("", "create cmd: \(error.description)")
        }
        let output = CappedOutput(limit: maxOutputBytes)
        // A collection whose task is cancelled (the connection dropped, shutdown) ends its
        // command at once: a hung one must not hold the reconnect or the shutdown until its
        // timeout.
        let process = ScriptProcess()
        let exit = await withTaskCancellationHandler {
            await process.run(command, timeout: timeout, merge: true, signal: SIGKILL, waitDelay: .seconds(1), handler: output)
        } onCancel: {
            process.cancel()
        }
        let (bytes, total) = output.taken
        let (value, note) = MetadataReporter.capped(bytes, totalBytes: total)
        if exit.startFailed, let error = exit.error, error.hasPrefix("start command: ") {
            return (value, "start cmd: " + error.dropFirst("start command: ".count))
        }
        var errors: [String] = []
        if let note { errors.append(note) }
        switch exit.status {
        case .timedOut: errors.append("signal: killed\ncontext deadline exceeded")
        case .exitFailure: if let error = exit.error { errors.append(error) }
        case .ok, .pipesLeftOpen: break
        }
        return (value, errors.isEmpty ? "" : "run cmd: " + errors.joined(separator: "\n"))
    }
}

/// Keeps the first `limit` bytes of a command's output and counts the rest.
/// Memory: at most `limit` bytes.
final class CappedOutput: ScriptOutputHandler {
    private struct State {
        var bytes: [UInt8] = []
        var total = 0
    }
    private let state = Mutex(State())
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    func output(_ chunk: UnsafeRawBufferPointer, from stream: ScriptStream) {
        state.withLock { s in
            s.total += chunk.count
            let room = limit - s.bytes.count
            if room > 0 { s.bytes.append(contentsOf: chunk.prefix(room)) }
        }
    }

    func finished() {}

    /// The kept bytes and the total written.
    var taken: (bytes: [UInt8], total: Int) { state.withLock { ($0.bytes, $0.total) } }
}
