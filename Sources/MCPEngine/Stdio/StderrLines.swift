/// A stdio server's stderr cut into lines for the agent's log: each line at most
/// ``MCPLimits/maxStderrLineBytes`` (the rest cut), at most ``MCPLimits/stderrBurstLines``
/// at once and ``MCPLimits/stderrLinesPerSecond`` after that (a token bucket); lines past
/// the rate are counted, and the count is logged when lines flow again or at the end.
///
/// Memory: one line of at most the line bound.
struct StderrLines {
    private var line: [UInt8] = []
    private var cut = false
    private var tokens: Double
    private var refilledAt: ContinuousClock.Instant
    private(set) var dropped = 0
    private let burst: Double
    private let perSecond: Double

    init(burst: Int = MCPLimits.stderrBurstLines, perSecond: Int = MCPLimits.stderrLinesPerSecond, now: ContinuousClock.Instant = .now) {
        self.burst = Double(burst)
        self.perSecond = Double(perSecond)
        tokens = Double(burst)
        refilledAt = now
    }

    mutating func feed(_ chunk: UnsafeRawBufferPointer, now: ContinuousClock.Instant, emit: (String) -> Void) {
        for byte in chunk {
            if byte == UInt8(ascii: "\n") {
                finishLine(now: now, emit: emit)
            } else if line.count < MCPLimits.maxStderrLineBytes {
                line.append(byte)
            } else {
                cut = true
            }
        }
    }

    /// The stream ended: the partial line and the dropped count.
    mutating func finish(now: ContinuousClock.Instant, emit: (String) -> Void) {
        if !line.isEmpty { finishLine(now: now, emit: emit) }
        if dropped > 0 {
            emit("(\(dropped) stderr lines dropped: over \(Int(perSecond)) lines a second)")
            dropped = 0
        }
    }

    private mutating func finishLine(now: ContinuousClock.Instant, emit: (String) -> Void) {
        defer {
            line.removeAll(keepingCapacity: true)
            cut = false
        }
        let elapsed = now - refilledAt
        refilledAt = now
        tokens = min(burst, tokens + Double(elapsed.components.seconds) * perSecond + Double(elapsed.components.attoseconds) / 1e18 * perSecond)
        guard tokens >= 1 else {
            dropped += 1
            return
        }
        tokens -= 1
        if dropped > 0 {
            emit("(\(dropped) stderr lines dropped: over \(Int(perSecond)) lines a second)")
            dropped = 0
        }
        var text = String(decoding: line, as: UTF8.self)
        if cut { text += " …(cut)" }
        emit(text)
    }
}
