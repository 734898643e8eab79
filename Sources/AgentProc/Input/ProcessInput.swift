import AgentCore
import CAgentSpawn
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A child's stdin: a pipe (`"stdin": true`) or its terminal (`"pty"`). Writes land in call
/// order, each whole or with the count that made it; a child that does not read makes a
/// write wait (back pressure) until ``writeTimeout`` after it arrived (waiting for its turn
/// included), then it fails saying how much was written, and every write queued behind it
/// then fails at once without being tried (they would only wait for the same child). A
/// close is bounded the same way. Nothing is dropped silently: a terminal in line mode
/// refuses a line longer than the kernel keeps (``TerminalLine``).
///
/// Memory: at most ``maxQueuedBytes`` of request bodies wait for their turn per process
/// (beyond that a write is refused at once), each at most ``maxWriteBytes``.
final class ProcessInput: Sendable {
    /// Largest single write (one `POST /stdin` body, one WebSocket frame).
    static let maxWriteBytes = 1 << 20
    /// Bytes of writes waiting their turn, per process.
    static let maxQueuedBytes = 4 << 20
    /// How long a write (or close) may take from its arrival, its wait for its turn
    /// included, when the child does not read.
    static let writeTimeout: Duration = .seconds(10)

    enum Kind: Sendable, Equatable {
        case pipe
        case terminal
    }

    /// Why a write (or close) did not complete.
    enum Failure: Error, Equatable {
        /// stdin was closed, or the process exited (409).
        case closed
        /// The child did not take the bytes in time (504); `written` of them went in.
        case stalled(written: Int)
        /// A write queued before this one timed out; this one was not tried (504).
        case behindStalled
        /// The time allowed ran out while writes before it waited; it was not tried (504).
        case expired
        /// A terminal in line mode would discard the end of this line (413): its
        /// unfinished line would exceed ``TerminalLine/maxLineBytes``; nothing was written.
        case lineTooLong
        /// More than ``maxQueuedBytes`` wait already (429).
        case busy
        /// The body is larger than ``maxWriteBytes`` (413).
        case tooLarge
        /// The reader went away (the child closed its stdin or exited) after part of the
        /// write went in (409, as ``closed``).
        case closedAfter(written: Int)
        /// The write failed otherwise (500): the OS error, and how much went in first.
        case failed(String, written: Int)
    }

    let kind: Kind
    private struct State {
        var fd: Int32
        /// No more writes: closed by the client, or the process exited.
        var closed = false
        var exited = false
        /// A write (or the close) holds the descriptor.
        var busy = false
        var queuedBytes = 0
        var turns: [CheckedContinuation<Void, Never>] = []
        /// Tickets of writes in arrival order; those up to ``failThrough`` were queued when a
        /// write timed out, and fail without being tried.
        var nextTicket: UInt64 = 1
        var failThrough: UInt64 = 0
        /// A terminal's unfinished line.
        var line = TerminalLine()
    }
    private let state: Mutex<State>

    /// Takes ownership of `fd` (non-blocking).
    init(fd: Int32, kind: Kind) {
        self.kind = kind
        state = Mutex(State(fd: fd))
        // A child that closed its stdin must make a write fail with EPIPE, not end the agent
        // (the daemon ignores SIGPIPE already; processes embedding the manager may not).
        Self.ignoreSIGPIPE
    }

    private static let ignoreSIGPIPE: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// Bytes of writes admitted and not finished, and callers waiting for their turn (tests).
    var pending: (bytes: Int, waiting: Int) { state.withLock { ($0.queuedBytes, $0.turns.count) } }

    /// Writes all of `bytes` after the writes before it, within `timeout` of the call; the
    /// count written, or why not.
    func write(_ bytes: [UInt8], timeout: Duration = writeTimeout) async -> Result<Int, Failure> {
        let deadline = ContinuousClock.now + timeout
        guard bytes.count <= Self.maxWriteBytes else { return .failure(.tooLarge) }
        let admitted = state.withLock { s -> Result<UInt64, Failure> in
            if s.closed { return .failure(.closed) }
            if s.queuedBytes + bytes.count > Self.maxQueuedBytes { return .failure(.busy) }
            s.queuedBytes += bytes.count
            defer { s.nextTicket += 1 }
            return .success(s.nextTicket)
        }
        guard case .success(let ticket) = admitted else {
            if case .failure(let failure) = admitted { return .failure(failure) }
            return .failure(.closed)
        }
        defer { state.withLock { $0.queuedBytes -= bytes.count } }
        // Every turn taken is handed on, also when it brings no descriptor.
        let fd = await takeTurn()
        defer { endTurn() }
        guard let fd else { return .failure(.closed) }
        if state.withLock({ ticket <= $0.failThrough }) { return .failure(.behindStalled) }
        if ContinuousClock.now >= deadline { return .failure(.expired) }
        let mode = kind == .terminal ? TerminalLine.Mode(fd: fd) : nil
        if let mode, state.withLock({ $0.line.after(bytes, mode: mode) }) == nil { return .failure(.lineTooLong) }
        let result = await Self.writeAll(bytes, to: fd, deadline: deadline)
        state.withLock { s in
            if kind == .terminal {
                let written =
                    switch result {
                    case .success(let n): n
                    case .failure(.stalled(let n)), .failure(.failed(_, let n)), .failure(.closedAfter(let n)): n
                    default: 0
                    }
                s.line.wrote(bytes.prefix(written), mode: mode)
            }
            // Everything queued now waits for the same child: it fails at once.
            if case .failure(.stalled) = result { s.failThrough = s.nextTicket - 1 }
        }
        return result
    }

    /// Ends the input after the writes queued before it, within `timeout` of the call: a
    /// pipe is closed (the child reads end-of-file); a terminal gets its end-of-file
    /// character (^D), so a program reading lines sees end-of-file as it would from a
    /// keyboard (two after an unfinished line). A close is not failed by a write before it
    /// that timed out.
    func close(timeout: Duration = writeTimeout) async -> Result<Void, Failure> {
        let deadline = ContinuousClock.now + timeout
        let already = state.withLock { s -> Bool in
            if s.closed { return true }
            return false
        }
        if already { return .failure(.closed) }
        let fd = await takeTurn()
        defer { endTurn() }
        guard let fd else { return .failure(.closed) }
        switch kind {
        case .pipe:
            state.withLock { $0.closed = true }
            return .success(())
        case .terminal:
            // The terminal stays open (for resize) until the process exits. In line mode a ^D
            // after an unfinished line only hands that line over (as a keyboard's first ^D):
            // a second one is the end-of-file.
            let eof = UInt8(truncatingIfNeeded: agent_pty_eof_char(fd))
            let unfinished = TerminalLine.Mode(fd: fd) != nil && state.withLock { $0.line.pending > 0 }
            let result = await Self.writeAll(unfinished ? [eof, eof] : [eof], to: fd, deadline: deadline)
            state.withLock { $0.closed = true }
            switch result {
            case .success: return .success(())
            case .failure(let failure): return .failure(failure)
            }
        }
    }

    /// Sets a terminal's window size (the kernel sends SIGWINCH to its foreground group);
    /// false for a pipe, or once the input is closed.
    func resize(rows: UInt16, cols: UInt16) -> Bool {
        state.withLock { s in
            guard kind == .terminal, !s.exited, s.fd >= 0 else { return false }
            return agent_pty_resize(s.fd, rows, cols) == 0
        }
    }

    /// The process exited: no more input; the descriptor closes once no write holds it.
    func processExited() {
        state.withLock { s in
            s.closed = true
            s.exited = true
            if !s.busy, s.fd >= 0 {
                Glibc.close(s.fd)
                s.fd = -1
            }
        }
    }

    /// Waits for this caller's turn (first come, first served); the descriptor, or nil when
    /// the input closed meanwhile.
    private func takeTurn() async -> Int32? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.busy {
                    s.turns.append(continuation)
                    return false
                }
                s.busy = true
                return true
            }
            if now { continuation.resume() }
        }
        return state.withLock { s -> Int32? in
            if s.closed || s.fd < 0 {
                return nil
            }
            return s.fd
        }
    }

    /// Closes the descriptor once no more input can go through it (a closed pipe, or the
    /// process exited), then hands the turn to the next writer (who then finds it closed).
    private func endTurn() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if s.closed && (kind == .pipe || s.exited), s.fd >= 0 {
                Glibc.close(s.fd)
                s.fd = -1
            }
            if !s.turns.isEmpty { return s.turns.removeFirst() }
            s.busy = false
            return nil
        }
        next?.resume()
    }

    deinit {
        // A process that was never watched (the reactor stopped during its start).
        state.withLock { s in
            if s.fd >= 0 { Glibc.close(s.fd) }
        }
    }

    /// Writes until done, waiting (event-driven) while the descriptor is full, until `deadline`.
    static func writeAll(_ bytes: [UInt8], to fd: Int32, deadline: ContinuousClock.Instant) async -> Result<Int, Failure> {
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                Glibc.write(fd, raw.baseAddress! + written, raw.count - written)
            }
            if n > 0 {
                written += n
                continue
            }
            let code = n < 0 ? errno : EAGAIN
            switch code {
            case EINTR:
                continue
            case EAGAIN:
                let left = deadline - .now
                guard left > .zero, await WritableWaiter.shared.waitWritable(fd, timeout: left) else {
                    return .failure(.stalled(written: written))
                }
            case EPIPE, EIO:
                // The reader is gone (the child closed its stdin or exited; a terminal with
                // no process left on it).
                return written == 0 ? .failure(.closed) : .failure(.closedAfter(written: written))
            default:
                return .failure(.failed(SystemCallError.message(code), written: written))
            }
        }
        return .success(written)
    }
}
