#if canImport(Glibc)
import Glibc
#endif

/// Cuts one output stream of a script (stdout or stderr) into log lines, the reference's
/// rules: a line ends at `\n`; exactly one `\r` right before the `\n` is dropped (also when
/// the chunk boundary falls between them, where the reference keeps it); a lone `\r` does
/// not split; an empty line is a line; the unterminated tail is a line at ``finish(into:)``
/// (kept as is, `\r` included, like the reference's `Close`).
///
/// Beyond the reference, a line is bounded: content past ``maxLineBytes`` up to the next
/// `\n` is dropped, the kept part is cut back to a UTF-8 character boundary and gets
/// ``truncationSuffix``; ``truncatedLines`` counts such lines (the script's log file keeps
/// every byte, that is elsewhere).
///
/// Fast: `memchr` finds each `\n`; a line wholly inside one chunk is handed out straight
/// from the caller's buffer (no copy); only a line spanning chunks is copied into the one
/// partial-line buffer. Memory: that buffer, at most `maxLineBytes + 1 + truncationSuffix`
/// bytes, allocated on first use and reused. One splitter per stream, not thread-safe.
struct LogLineSplitter {
    /// One line, borrowed: `bytes` is valid only during the callback (copy or sanitise it
    /// there); no `\n`, no dropped `\r`. `truncated` when content was dropped (the suffix
    /// is then already part of `bytes`).
    struct Line {
        let bytes: UnsafeRawBufferPointer
        let truncated: Bool
    }

    static let defaultMaxLineBytes = 64 * 1024
    static let truncationSuffix: [UInt8] = Array(" …(line truncated)".utf8)

    /// The most content bytes of a line handed out before truncation (at least 4, so a
    /// character always fits).
    let maxLineBytes: Int
    /// Lines that were cut at ``maxLineBytes``, since the splitter was made.
    private(set) var truncatedLines = 0

    /// The current line's bytes so far when it spans chunks: up to `maxLineBytes + 1`
    /// (the extra byte may be a `\r` that the `\n` will drop).
    private var partial: [UInt8] = []
    /// The current line has passed `maxLineBytes + 1` bytes; the rest of it is dropped.
    private var overflowing = false

    init(maxLineBytes: Int = LogLineSplitter.defaultMaxLineBytes) {
        self.maxLineBytes = max(4, maxLineBytes)
    }

    /// Splits `bytes`, calling `body` for each completed line in order. `body` must not
    /// use this splitter.
    mutating func feed(_ bytes: UnsafeRawBufferPointer, into body: (Line) throws -> Void) rethrows {
        guard var position = bytes.baseAddress, bytes.count > 0 else { return }
        let end = position + bytes.count
        while position < end {
            guard let found = memchr(position, 0x0A, end - position) else {
                appendPartial(UnsafeRawBufferPointer(start: position, count: end - position))
                return
            }
            let newline = UnsafeRawPointer(found)
            if partial.isEmpty && !overflowing {
                // The whole line is in this chunk: hand it out in place.
                var length = newline - position
                if length > 0 && position.load(fromByteOffset: length - 1, as: UInt8.self) == 0x0D { length -= 1 }
                let line = UnsafeRawBufferPointer(start: position, count: length)
                if length <= maxLineBytes {
                    try body(Line(bytes: line, truncated: false))
                } else {
                    appendPartial(line)
                    try emitPartial(stripCR: false, body)
                }
            } else {
                appendPartial(UnsafeRawBufferPointer(start: position, count: newline - position))
                try emitPartial(stripCR: true, body)
            }
            position = newline + 1
        }
    }

    mutating func feed(_ bytes: [UInt8], into body: (Line) throws -> Void) rethrows {
        try bytes.withUnsafeBytes { buffer in try feed(buffer, into: body) }
    }

    /// The stream ended: the unterminated tail, if any, is the last line.
    mutating func finish(into body: (Line) throws -> Void) rethrows {
        guard overflowing || !partial.isEmpty else { return }
        try emitPartial(stripCR: false, body)
    }

    private mutating func appendPartial(_ bytes: UnsafeRawBufferPointer) {
        guard !overflowing, bytes.count > 0 else { return }
        if partial.capacity == 0 { partial.reserveCapacity(maxLineBytes + 1 + Self.truncationSuffix.count) }
        let room = maxLineBytes + 1 - partial.count
        if bytes.count <= room {
            partial.append(contentsOf: bytes)
        } else {
            partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[0..<room]))
            overflowing = true
        }
    }

    /// Hands out `partial` as a line (truncated if it is too long) and starts a new one.
    private mutating func emitPartial(stripCR: Bool, _ body: (Line) throws -> Void) rethrows {
        if stripCR && !overflowing && partial.last == 0x0D { partial.removeLast() }
        let truncated = overflowing || partial.count > maxLineBytes
        if truncated {
            partial.removeSubrange(Self.characterBoundary(partial, atMost: maxLineBytes)...)
            partial.append(contentsOf: Self.truncationSuffix)
            truncatedLines += 1
        }
        overflowing = false
        defer { partial.removeAll(keepingCapacity: true) }
        try partial.withUnsafeBytes { buffer in try body(Line(bytes: buffer, truncated: truncated)) }
    }

    /// The largest cut ≤ `limit` (≤ `bytes.count`) that does not split a UTF-8 sequence
    /// whose lead byte lies in the last three bytes before `limit`.
    static func characterBoundary(_ bytes: [UInt8], atMost limit: Int) -> Int {
        let limit = min(limit, bytes.count)
        var index = limit - 1
        while index >= 0 && index >= limit - 4 {
            let byte = bytes[index]
            if byte & 0xC0 != 0x80 {
                let width = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1
                return index + width > limit ? index : limit
            }
            index -= 1
        }
        return limit
    }
}
