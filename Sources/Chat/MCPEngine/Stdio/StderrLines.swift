import AgentCore

/// A stdio server's stderr cut into lines for the agent's log: each line at most
/// ``MCPLimits/maxStderrLineBytes`` (the rest cut), at most ``MCPLimits/stderrBurstLines``
/// at once and ``MCPLimits/stderrLinesPerSecond`` after that (a token bucket); lines past
/// the rate are counted, and the count is logged when lines flow again or at the end.
///
/// Memory: one line of at most the line bound.
struct StderrLines {
    private var line: [UInt8] = []
    private var cut = false
    private var lines: TokenBucket
    private(set) var dropped = 0

    init(burst: Int = MCPLimits.stderrBurstLines, perSecond: Int = MCPLimits.stderrLinesPerSecond, now: ContinuousClock.Instant = .now) {
        lines = TokenBucket(capacity: Double(burst), perSecond: Double(perSecond), now: now)
    }

    mutating func feed(_ chunk: UnsafeRawBufferPointer, now: ContinuousClock.Instant, emit: (String) -> Void) {
        var start = 0
        while start < chunk.count {
            let newline = chunk[start...].firstIndex(of: UInt8(ascii: "\n"))
            let end = newline ?? chunk.count
            let room = MCPLimits.maxStderrLineBytes - line.count
            if end - start > room { cut = true }
            if room > 0 { line.append(contentsOf: chunk[start..<min(end, start + room)]) }
            guard newline != nil else { return }
            finishLine(now: now, emit: emit)
            start = end + 1
        }
    }

    /// The stream ended: the partial line and the dropped count.
    mutating func finish(now: ContinuousClock.Instant, emit: (String) -> Void) {
        if !line.isEmpty { finishLine(now: now, emit: emit) }
        if dropped > 0 {
            emit("(\(dropped) stderr lines dropped: over \(Int(lines.perSecond)) lines a second)")
            dropped = 0
        }
    }

    private mutating func finishLine(now: ContinuousClock.Instant, emit: (String) -> Void) {
        defer {
            line.removeAll(keepingCapacity: true)
            cut = false
        }
        guard lines.take(now: now) else {
            dropped += 1
            return
        }
        if dropped > 0 {
            emit("(\(dropped) stderr lines dropped: over \(Int(lines.perSecond)) lines a second)")
            dropped = 0
        }
        var text = String(decoding: line, as: UTF8.self)
        if cut { text += " …(cut)" }
        emit(text)
    }
}
