import CAgentSpawn
import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// A session's child (SSH, the reconnecting PTY): spawned in a session of its own (so its
/// group can be signalled as a whole), with a terminal or with three pipes, registered with
/// ``OwnedChildren`` until it is reaped (the process API's adoption never takes it). Its exit is
/// seen by the shared ``ChildReactor`` (no thread per session), which reaps it at once.
public struct SessionProcess: Sendable {
    /// The agent's ends: for a terminal, `output` is the terminal's primary side (read) and
    /// `input` a second descriptor of it (written: NIO's pipe channel takes two distinct
    /// ones, and dups one with `try!` when given one), `errors` is -1. Handed to a pipe
    /// bootstrap, they are NIO's whatever the outcome: a failure after its channel is made
    /// closes them itself, so a caller never closes them again.
    public let pid: pid_t
    public let output: Int32
    public let input: Int32
    public let errors: Int32
    /// The child on the reactor: its exit, and signals only while it is ours.
    public let child: Child

    public struct SpawnError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Spawns `argv` (its first element an absolute path) in `directory`, with the
    /// environment `environment` gives for the terminal's path (`/dev/pts/3`; nil without one).
    /// `prepareTerminal` gets the terminal's primary side before the child starts (an SSH
    /// client's terminal modes: a program that reads them at start must see them).
    public static func spawn(
        argv: [String], environment: (_ terminal: String?) -> [String: String], directory: String,
        terminal: (rows: UInt16, columns: UInt16)?, prepareTerminal: (_ primary: Int32) -> Void = { _ in }
    ) throws(SpawnError) -> SessionProcess {
        var agentOutput: Int32 = -1
        var agentInput: Int32 = -1
        var agentErrors: Int32 = -1
        var childIn: Int32 = -1
        var childOut: Int32 = -1
        var childErr: Int32 = -1
        if let terminal {
            var primary: Int32 = -1
            var secondary: Int32 = -1
            guard agent_open_pty(&primary, &secondary, terminal.rows, terminal.columns) == 0 else {
                throw SpawnError(description: "open pty: " + SystemCallError(call: "openpty", errno: errno).description)
            }
            // Made here, where running out of descriptors is a failed spawn, not a trap.
            let writer = fcntl(primary, F_DUPFD_CLOEXEC, 0)
            guard writer >= 0 else {
                let error = SystemCallError(call: "dup", errno: errno)
                close(primary)
                close(secondary)
                throw SpawnError(description: "open pty: \(error)")
            }
            agentOutput = primary
            agentInput = writer
            childIn = secondary
            childOut = secondary
            prepareTerminal(primary)
        } else {
            var stdinPair: [Int32] = [-1, -1]
            var stdoutPair: [Int32] = [-1, -1]
            var stderrPair: [Int32] = [-1, -1]
            guard agent_input_pipe(&stdinPair) == 0 else { throw SpawnError(description: "pipe: \(SystemCallError.message(errno))") }
            guard agent_output_pipe(&stdoutPair, 0) == 0 else {
                for fd in stdinPair { close(fd) }
                throw SpawnError(description: "pipe: \(SystemCallError.message(errno))")
            }
            guard agent_output_pipe(&stderrPair, 0) == 0 else {
                for fd in stdinPair + stdoutPair { close(fd) }
                throw SpawnError(description: "pipe: \(SystemCallError.message(errno))")
            }
            agentInput = stdinPair[1]
            agentOutput = stdoutPair[0]
            agentErrors = stderrPair[0]
            childIn = stdinPair[0]
            childOut = stdoutPair[1]
            childErr = stderrPair[1]
        }
        func closeChildEnds() {
            for fd in Set([childIn, childOut, childErr]) where fd >= 0 { close(fd) }
        }
        func closeAgentEnds() {
            for fd in [agentOutput, agentInput, agentErrors] where fd >= 0 { close(fd) }
        }
        let block = environment(terminal == nil ? nil : terminalName(agentOutput))
        var spec = ChildSpec(
            executable: argv[0], arguments: argv, environment: ChildSpec.environment(block), directory: directory,
            input: childIn, output: childOut, errors: childErr, grouping: .newSession)
        spec.controllingTerminal = terminal != nil
        let child: Child
        do throws(ChildSpawnError) {
            child = try ChildReactor.shared.spawn(spec)
        } catch {
            closeChildEnds()
            closeAgentEnds()
            throw SpawnError(description: error.description(executable: argv[0], directory: directory))
        }
        closeChildEnds()
        return SessionProcess(pid: child.pid, output: agentOutput, input: agentInput, errors: agentErrors, child: child)
    }

    /// The path of the terminal whose primary side is `primary` (`/dev/pts/3`).
    public static func terminalName(_ primary: Int32) -> String {
        let number = agent_pty_number(primary)
        return number < 0 ? "" : "/dev/pts/\(number)"
    }

    /// Calls `body` with the wait status once the child has exited and been reaped: at once
    /// if it has, else on the reactor's thread (where it must not block).
    public func onExit(_ body: @escaping @Sendable (Int32) -> Void) {
        child.onExit(body)
    }

    /// Blocks the calling thread until the child has exited and been reaped; returns its wait
    /// status. Only for a caller with no event loop or task to wait in (the header command at
    /// start): others use ``onExit(_:)``.
    public func waitForExit() -> Int32 {
        let exited = DispatchSemaphore(value: 0)
        child.onExit { _ in exited.signal() }
        exited.wait()
        return child.status ?? 0
    }

    /// Reads what the terminal's primary side holds now, at most `maxBytes`, handing each
    /// chunk to `body`; stops at the first read that brings nothing (no more data, the end
    /// of output, or an error). For a session ending after its process exited, whose loop
    /// may not have polled the terminal since the last output. Call only where the
    /// descriptor's own reader cannot run meanwhile (its event loop) and while it is open and
    /// non-blocking (as NIO keeps it).
    public func readHeldOutput(maxBytes: Int, _ body: ([UInt8]) -> Void) {
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        var total = 0
        while total < maxBytes {
            let count = chunk.withUnsafeMutableBytes { read(output, $0.baseAddress, min($0.count, maxBytes - total)) }
            guard count > 0 else { return }
            body(Array(chunk[..<count]))
            total += count
        }
    }

    /// Sends `signal` to the child's process group (it leads a session of its own).
    public func signalGroup(_ signal: Int32) {
        child.signal(signal, to: .group)
    }

    /// Sends `signal` to every process group of the child's session (it leads one: jobs an
    /// interactive shell started in groups of their own are reached too), until it is reaped.
    public func signalSession(_ signal: Int32) {
        child.signal(signal, to: .session)
    }

    /// Sends `signal` to the child alone (what a client's `signal` request does).
    public func signalChild(_ signal: Int32) {
        child.signal(signal, to: .process)
    }
}
