import AgentJSON
import AgentSystem
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The short commands the git helpers run in the caller's process (`ssh -G`, `git
/// rev-parse`, `ssh` itself): found on `PATH`, with the caller's environment, in the caller's
/// process group (its terminal's foreground), started and watched by the shared
/// ``ChildReactor``.
enum LocalCommand {
    /// Why a command could not start, in the words of Go's `os/exec` (what the reference's
    /// errors read).
    enum StartFailure: Error, Equatable, CustomStringConvertible {
        /// Not on `PATH` (`exec.ErrNotFound`).
        case notFound(name: String)
        /// Found only relative to the current directory (an empty or relative `PATH` entry),
        /// which Go refuses (`exec.ErrDot`).
        case relative(name: String)
        /// Found, but the spawn failed (`fork/exec /usr/bin/ssh: permission denied`).
        case spawn(executable: String, step: ChildSpawnError.Step, errno: Int32)

        var description: String {
            switch self {
            case .notFound(let name): return "exec: \(goQuote(name)): executable file not found in $PATH"
            case .relative(let name): return "exec: \(goQuote(name)): cannot run executable found relative to current directory"
            case .spawn(let executable, let step, let code): return ChildSpawnError(step: step, errno: code).description(executable: executable, directory: nil)
            }
        }
    }

    /// Runs `argv` with stdin and stderr on /dev/null and returns its exit status and at most
    /// `maxBytes` of its stdout; nil when it cannot start, outlives `timeout` (then killed)
    /// or does not exit normally.
    static func capture(_ argv: [String], maxBytes: Int, timeout: Duration) -> (status: Int32, output: [UInt8])? {
        guard let spec = try? spec(argv) else { return nil }
        var options = ChildCapture.Options(maxOutput: maxBytes, timeout: timeout)
        options.killScope = .process
        let result = ChildCapture.runBlocking(spec, options: options)
        guard !result.timedOut, let status = result.status, status & 0x7f == 0 else { return nil }
        return ((status >> 8) & 0xff, result.output)
    }

    /// Runs `argv` on the caller's stdin, stdout and stderr and returns its wait status;
    /// SIGINT, SIGTERM and SIGHUP that reach this process meanwhile are passed on to it (so
    /// the caller's clean-up runs after it has ended). Throws when it cannot start.
    static func runForwardingSignals(_ argv: [String]) throws(StartFailure) -> Int32 {
        var spec = try spec(argv)
        spec.input = 0
        spec.output = 1
        spec.errors = 2
        let forwarded = [SIGINT, SIGTERM, SIGHUP]
        var previous: [sigaction] = []
        for signal in forwarded {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { received in PendingSignal.value.store(received, ordering: .relaxed) }
            sigemptyset(&action.sa_mask)
            action.sa_flags = 0
            var old = sigaction()
            sigaction(signal, &action, &old)
            previous.append(old)
        }
        defer {
            for (index, signal) in forwarded.enumerated() {
                var old = previous[index]
                sigaction(signal, &old, nil)
            }
        }
        let child: Child
        do throws(ChildSpawnError) {
            child = try ChildReactor.shared.spawn(spec)
        } catch {
            throw .spawn(executable: spec.executable, step: error.step, errno: error.errno)
        }
        // The reactor sees the end at once; a signal caught on any thread is looked for at
        // least every 100 ms.
        let exited = DispatchSemaphore(value: 0)
        child.onExit { _ in exited.signal() }
        while true {
            if let status = child.status { return status }
            let signal = PendingSignal.value.exchange(0, ordering: .relaxed)
            if signal != 0 { child.signal(signal, to: .process) }
            _ = exited.wait(timeout: .now() + .milliseconds(100))
        }
    }

    /// The description of `argv`'s run: its program found on the caller's `PATH` as Go's
    /// `exec.LookPath` finds it, the caller's environment and directory, the caller's process
    /// group.
    static func spec(_ argv: [String]) throws(StartFailure) -> ChildSpec {
        let name = argv.first ?? ""
        guard let found = ExecutableLookup.find(name, path: getenv("PATH").map { String(cString: $0) }) else { throw .notFound(name: name) }
        // A match in the current directory (git runs this in the repository) is not run.
        guard name.contains("/") || found.hasPrefix("/") else { throw .relative(name: name) }
        var environment: [String] = []
        var entry = environ
        while let variable = entry.pointee {
            environment.append(String(cString: variable))
            entry += 1
        }
        var spec = ChildSpec(executable: found, arguments: argv, environment: environment)
        spec.grouping = .callersGroup
        return spec
    }
}

/// The last forwarded signal caught while a child runs (0: none); a lock-free atomic, so
/// the handler may store to it.
enum PendingSignal {
    static let value = Atomic<Int32>(0)
}
