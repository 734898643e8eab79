/// The life of one SSH session channel without I/O, as ``PTYLifetime`` is for the reconnecting
/// PTY: the process starts, exits, its output drains, the exit status goes out, the channel
/// closes. ``SSHSessionHandler`` feeds it what happened and does what it returns; the unit
/// tests drive it alone.
///
/// - The session finishes (exit status or signal, then close) once the process has exited and
///   every output relay has ended.
/// - A terminal may be held open by a background job after the shell exited: its output gets
///   a bounded drain (``SSHSessionHandler/terminalDrain``) and the session finishes anyway.
/// - The client closing the channel before the process exited hangs the process up (SIGHUP).
struct SSHSessionLife: Sendable, Equatable {
    /// What the handler must do.
    enum Action: Sendable, Equatable {
        /// Call ``drainDue()`` after the terminal drain delay.
        case scheduleDrain
        /// Send what the terminal still holds (bounded), on the loop, before finishing.
        case drainTerminal
        /// Send this wait status as exit-status or exit-signal, then close the channel and its
        /// relays.
        case finish(status: Int32)
        /// SIGHUP to the process's group (a closing terminal's hang-up).
        case hangUp
    }

    /// The process runs on a terminal.
    private(set) var terminal = false
    /// A process was started (a hang-up has someone to reach).
    private(set) var started = false
    /// Output relays not yet ended (stdout and stderr, or the terminal).
    private(set) var openOutputs = 0
    /// Output relays attached so far.
    private(set) var attachedOutputs = 0
    /// The wait status to report, once known (the process's, or the agent's own for a
    /// session that ran none).
    private(set) var exitStatus: Int32?
    /// Finished or closed: nothing more is sent.
    private(set) var ended = false

    /// The process started; its relays (one for a terminal, stdout and stderr otherwise) are
    /// being set up.
    mutating func processStarted(terminal: Bool) {
        self.terminal = terminal
        started = true
        openOutputs = terminal ? 1 : 2
    }

    /// A relay is attached: a terminal whose process already exited drains from now.
    mutating func outputAttached() -> [Action] {
        attachedOutputs += 1
        return terminal && exitStatus != nil && !ended ? [.scheduleDrain] : []
    }

    /// A relay ended (EOF, or it could not be set up).
    mutating func outputEnded() -> [Action] {
        openOutputs -= 1
        return finishIfDone()
    }

    /// The process exited (and was reaped) with `status`.
    mutating func processExited(status: Int32) -> [Action] {
        exitStatus = status
        var actions: [Action] = []
        // What the terminal still holds drains; a background job holding it does not keep
        // the session.
        if terminal, openOutputs > 0, attachedOutputs > 0, !ended { actions.append(.scheduleDrain) }
        return actions + finishIfDone()
    }

    /// The session ends without a process (refused, or it could not start) with `status`:
    /// finished after the request's reply.
    mutating func endWithoutProcess(status: Int32) {
        exitStatus = status
    }

    /// Finishes now (after ``endWithoutProcess(status:)``, once the reply is out).
    mutating func finishNow() -> [Action] {
        guard !ended else { return [] }
        ended = true
        return [.finish(status: exitStatus ?? 0)]
    }

    /// The terminal drain's delay passed: what it holds goes out, then the session finishes.
    mutating func drainDue() -> [Action] {
        guard !ended else { return [] }
        let drain = terminal && openOutputs > 0 && attachedOutputs > 0
        return (drain ? [.drainTerminal] : []) + finishNow()
    }

    /// The channel closed (the client went, or the finish's close came back).
    mutating func channelClosed() -> [Action] {
        defer { ended = true }
        return !ended && exitStatus == nil && started ? [.hangUp] : []
    }

    private mutating func finishIfDone() -> [Action] {
        guard !ended, exitStatus != nil, openOutputs <= 0 else { return [] }
        return finishNow()
    }
}
