import Logging

/// Keeps one noisy part of the agent from crowding everyone else's warnings out of what goes
/// upward (the upward log queue holds 1 000 lines and drops the oldest): each source (the
/// module that logged) and level gets at most ``perWindow`` lines per ``window``; past that
/// its lines are counted, and the next line of that source and level after the window
/// carries how many were left out. Errors have their own budget, so a flood of warnings
/// never costs an error its place.
///
/// Bounded: at most ``maxKeys`` source/level pairs (the one used longest ago is forgotten).
struct LogFloodGate: Sendable {
    static let perWindow = 60
    static let window = Duration.seconds(60)
    static let maxKeys = 256

    private struct Entry {
        var start: ContinuousClock.Instant
        var sent = 0
        var suppressed = 0
        var used: UInt64
    }

    private var entries: [String: Entry] = [:]
    private var clock: UInt64 = 0

    /// The message to send for this line (with a note of lines left out before it), or
    /// nil when it is held back.
    mutating func admit(source: String, level: Logger.Level, message: String, now: ContinuousClock.Instant = .now) -> String? {
        let key = source + (level >= .error ? "\u{0}e" : "\u{0}w")
        clock += 1
        var entry = entries[key] ?? Entry(start: now, used: clock)
        entry.used = clock
        var note = ""
        if now - entry.start >= Self.window {
            if entry.suppressed > 0 {
                note = " (\(entry.suppressed) similar lines from \(source) left out in the last \(Self.window))"
            }
            entry = Entry(start: now, used: clock)
        }
        guard entry.sent < Self.perWindow else {
            entry.suppressed += 1
            entries[key] = entry
            return nil
        }
        entry.sent += 1
        if entries[key] == nil, entries.count >= Self.maxKeys, let oldest = entries.min(by: { $0.value.used < $1.value.used })?.key {
            entries[oldest] = nil
        }
        entries[key] = entry
        return message + note
    }
}
