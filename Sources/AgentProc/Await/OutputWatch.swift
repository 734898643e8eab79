import AgentCore
import CAgentSpawn
import LineRegex
import Synchronization

/// What a line of output must contain for an await to end.
public enum LineCondition: Sendable {
    /// A regular expression in RE2 syntax (linear-time matching, no backreferences).
    case pattern(LineRegex)
    /// Exact bytes (`until_literal=`).
    case literal([UInt8])

    /// True when `line` (without its newline) satisfies the condition.
    func matches(_ line: UnsafeRawBufferPointer) -> Bool {
        switch self {
        case .pattern(let regex):
            return regex.matches(line)
        case .literal(let needle):
            if needle.isEmpty { return true }
            return needle.withUnsafeBytes { n in
                agent_memmem(line.baseAddress, line.count, n.baseAddress, n.count) != nil
            }
        }
    }
}

/// Matches one await's condition against a process's output, line by line, from a given
/// offset: first what was already written (read back from the spool by ``catchUp(_:)``),
/// then live output as the reactor writes it (``feed(_:at:)``, on the output path: no
/// polling). Lines are split at `\n`; one trailing `\r` is not part of the line.
///
/// A prompt does not end its line (`Continue? [y/N] `): the unfinished last line is tested
/// too after each write while it is at most ``promptBytes`` long, and at exit whatever its
/// length up to ``maxLineBytes``.
///
/// Memory: the unfinished line, at most ``maxLineBytes`` (a longer line is matched on its
/// first ``maxLineBytes``); live output arriving during the catch-up, at most
/// ``maxPendingBytes`` (beyond that it is skipped and matching resumes at the next line).
/// Cost: each byte is matched once as part of its line, plus the re-tests of an unfinished
/// line, at most ``promptBudget`` bytes per line (output arriving a byte at a time would
/// otherwise re-test a growing prompt once per byte); then the line waits for its end.
public final class OutputWatch: Sendable {
    public static let maxLineBytes = 64 * 1024
    public static let promptBytes = 4096
    public static let promptBudget = 64 * 1024
    public static let maxPendingBytes = 1 << 20

    /// A line that satisfied the condition and the offset of its first byte in the whole
    /// output.
    public struct Match: Sendable, Equatable {
        public var line: [UInt8]
        public var offset: UInt64
    }

    private struct State {
        var line: [UInt8] = []
        var lineStart: UInt64
        /// The next offset expected (a different one means bytes were skipped).
        var position: UInt64
        var catchingUp = true
        var pending: [(offset: UInt64, bytes: [UInt8])] = []
        var pendingBytes = 0
        var match: Match?
        /// Bytes of this line spent re-testing it unfinished.
        var promptSpent = 0
        /// The output ended while catching up: the unfinished line is tested at its end.
        var ended = false
    }

    let condition: LineCondition
    private let state: Mutex<State>
    /// Fired once a line matches.
    let matched = OneShotSignal()

    init(condition: LineCondition, from offset: UInt64) {
        self.condition = condition
        state = Mutex(State(lineStart: offset, position: offset))
    }

    public var match: Match? { state.withLock { $0.match } }

    /// Live output at `offset` (reactor thread). During the catch-up it is queued.
    func feed(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) {
        let fired = state.withLock { s -> Bool in
            guard s.match == nil else { return false }
            if s.catchingUp {
                if s.pendingBytes + bytes.count <= Self.maxPendingBytes {
                    s.pending.append((offset, Array(bytes)))
                    s.pendingBytes += bytes.count
                }
                return false
            }
            return scan(&s, bytes, at: offset)
        }
        if fired { matched.fire() }
    }

    /// Matches `bytes` (read back from the spool, in order) while catching up.
    func catchUp(_ bytes: [UInt8], at offset: UInt64) {
        let fired = state.withLock { s -> Bool in
            guard s.match == nil else { return false }
            return bytes.withUnsafeBytes { scan(&s, $0, at: offset) }
        }
        if fired { matched.fire() }
    }

    /// Ends the catch-up: what arrived meanwhile is matched (the part already read back is
    /// skipped), and live output is matched as it comes from now on.
    func endCatchUp() {
        let fired = state.withLock { s -> Bool in
            defer {
                s.catchingUp = false
                s.pending = []
                s.pendingBytes = 0
            }
            for (offset, bytes) in s.pending where s.match == nil {
                let end = offset + UInt64(bytes.count)
                guard end > s.position else { continue }
                let skip = offset < s.position ? Int(s.position - offset) : 0
                let hit = bytes.withUnsafeBytes { scan(&s, UnsafeRawBufferPointer(rebasing: $0[skip...]), at: offset + UInt64(skip)) }
                if hit { return true }
            }
            if s.ended, s.match == nil, !s.line.isEmpty { return test(&s, s.line) }
            return false
        }
        if fired { matched.fire() }
    }

    /// The process's output is complete: the unfinished last line is tested whatever its
    /// length (after the catch-up, if one is under way).
    func outputEnded() {
        let fired = state.withLock { s -> Bool in
            guard s.match == nil else { return false }
            guard !s.catchingUp else {
                s.ended = true
                return false
            }
            guard !s.line.isEmpty else { return false }
            return test(&s, s.line)
        }
        if fired { matched.fire() }
    }

    /// Splits at newlines and tests each line; true on the first match.
    private func scan(_ s: inout State, _ bytes: UnsafeRawBufferPointer, at offset: UInt64) -> Bool {
        guard !bytes.isEmpty else { return false }
        if offset != s.position {
            // A gap (bytes dropped before they were seen): start afresh where output resumes.
            s.line.removeAll(keepingCapacity: true)
            s.lineStart = offset
            s.promptSpent = 0
        }
        s.position = offset + UInt64(bytes.count)
        var start = 0
        while start < bytes.count {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[start...])
            guard let newline = rest.firstIndex(of: UInt8(ascii: "\n")) else {
                append(&s, rest)
                break
            }
            let end = newline - rest.startIndex + start
            append(&s, UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
            if test(&s, s.line) { return true }
            s.line.removeAll(keepingCapacity: true)
            s.lineStart = offset + UInt64(end + 1)
            s.promptSpent = 0
            start = end + 1
        }
        if !s.line.isEmpty, s.line.count <= Self.promptBytes, s.promptSpent + s.line.count <= Self.promptBudget {
            s.promptSpent += s.line.count
            if test(&s, s.line) { return true }
        }
        return false
    }

    private func append(_ s: inout State, _ part: UnsafeRawBufferPointer) {
        let room = Self.maxLineBytes - s.line.count
        if room > 0 { s.line.append(contentsOf: part.prefix(room)) }
    }

    private func test(_ s: inout State, _ line: [UInt8]) -> Bool {
        let body = line.last == UInt8(ascii: "\r") ? Array(line.dropLast()) : line
        let hit = body.withUnsafeBytes { condition.matches($0) }
        if hit { s.match = Match(line: body, offset: s.lineStart) }
        return hit
    }
}
