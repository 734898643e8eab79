/// The head/tail output store, without locking.
///
/// The first `headCapacity` bytes a child writes are kept verbatim; after that only the
/// last `tailCapacity` bytes are kept in a ring, so memory is bounded by
/// `headCapacity + tailCapacity` however much is written. ``ManagedProcess``
/// wraps it in its lock.
public struct HeadTail: Sendable {
    /// Spec constants: 16 KiB head, 16 KiB tail, 2048-byte lines.
    public static let defaultHeadCapacity = 16384
    public static let defaultTailCapacity = 16384
    public static let defaultMaxLineLength = 2048
    /// Appended to a line cut at `maxLineLength` (16 bytes; the cut line is exactly `maxLineLength`).
    public static let truncationSuffix: [UInt8] = Array(" ... [truncated]".utf8)

    public let headCapacity: Int
    public let tailCapacity: Int
    public let maxLineLength: Int

    private var head: [UInt8] = []
    private var ring: [UInt8] = []
    private var ringStart = 0
    private var ringCount = 0
    /// Bytes counted by ``skip(_:)`` since the ring was last written. The ring still holds
    /// the tail as it was before them; the next bytes written replace it (they are not
    /// continuous with it), and until then ``output()`` shows the output as it was then.
    private var skippedAfterRing = 0
    /// Every byte ever written, including the ones no longer retained.
    public private(set) var totalWritten: Int = 0

    public init(
        headCapacity: Int = HeadTail.defaultHeadCapacity,
        tailCapacity: Int = HeadTail.defaultTailCapacity,
        maxLineLength: Int = HeadTail.defaultMaxLineLength
    ) {
        precondition(headCapacity >= 0 && tailCapacity >= 0 && maxLineLength > HeadTail.truncationSuffix.count)
        self.headCapacity = headCapacity
        self.tailCapacity = tailCapacity
        self.maxLineLength = maxLineLength
    }

    /// Bytes currently retained (head plus tail): a tail from before a skip is not counted,
    /// as nothing written later follows it.
    public var retainedCount: Int { head.count + continuousTailCount }

    /// The tail's bytes that end at the last byte written (none between a skip and the next write).
    private var continuousTailCount: Int { skippedAfterRing > 0 ? 0 : ringCount }

    /// True once the head holds all it can: later bytes only pass through the tail.
    public var isHeadFull: Bool { head.count >= headCapacity }

    /// Counts `count` bytes written after the head was full but never seen (dropped
    /// unread). They break the tail's continuity, so the tail starts over with the next
    /// bytes written (the process reactor drops only what precedes a full tail's worth, and
    /// reads that worth before its pass ends). The tail before them stays until then:
    /// ``output()`` never loses its tail and its `truncated` block to a skip.
    public mutating func skip(_ count: Int) {
        precondition(isHeadFull && count >= 0)
        totalWritten += count
        skippedAfterRing += count
    }

    /// Appends `bytes`; always accepted in full. Costs O(min(n, head + tail)).
    public mutating func write(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        totalWritten += bytes.count
        var rest = bytes[...]
        if head.count < headCapacity {
            let take = min(headCapacity - head.count, rest.count)
            if head.capacity == 0 { head.reserveCapacity(min(headCapacity, max(take, 256))) }
            head.append(contentsOf: rest.prefix(take))
            rest = rest.dropFirst(take)
        }
        guard !rest.isEmpty, tailCapacity > 0 else { return }
        if ring.isEmpty { ring = [UInt8](repeating: 0, count: tailCapacity) }
        if skippedAfterRing > 0 {
            // The first bytes after a skip: the tail before it is not continuous with them.
            ringStart = 0
            ringCount = 0
            skippedAfterRing = 0
        }
        if rest.count >= tailCapacity {
            // Only the newest tailCapacity bytes can survive: copy just those.
            let newest = rest.suffix(tailCapacity)
            ring.withUnsafeMutableBytes { dst in
                dst.copyMemory(from: UnsafeRawBufferPointer(rebasing: newest))
            }
            ringStart = 0
            ringCount = tailCapacity
            return
        }
        ring.withUnsafeMutableBytes { dst in
            var writeAt = (ringStart + ringCount) % tailCapacity
            var remaining = rest
            while !remaining.isEmpty {
                let n = min(tailCapacity - writeAt, remaining.count)
                UnsafeMutableRawBufferPointer(rebasing: dst[writeAt..<(writeAt + n)])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: remaining.prefix(n)))
                remaining = remaining.dropFirst(n)
                writeAt = (writeAt + n) % tailCapacity
            }
        }
        let overflow = ringCount + rest.count - tailCapacity
        if overflow > 0 {
            ringStart = (ringStart + overflow) % tailCapacity
            ringCount = tailCapacity
        } else {
            ringCount += rest.count
        }
    }

    /// Convenience for tests and small writes.
    public mutating func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { write($0) }
    }

    /// Clears everything, including the total.
    public mutating func reset() {
        head.removeAll(keepingCapacity: true)
        ringStart = 0
        ringCount = 0
        skippedAfterRing = 0
        totalWritten = 0
    }

    /// The retained head bytes, verbatim.
    public var headBytes: [UInt8] { head }

    /// The retained tail bytes in write order, verbatim; empty between a skip and the next
    /// write (what follows continues from the skipped bytes, not from that tail).
    public var tailBytes: [UInt8] { continuousTailCount > 0 ? ringBytes : [] }

    /// The ring's bytes in write order (a tail from before a skip included).
    private var ringBytes: [UInt8] {
        guard ringCount > 0 else { return [] }
        let firstPart = min(ringCount, tailCapacity - ringStart)
        var out = [UInt8]()
        out.reserveCapacity(ringCount)
        out.append(contentsOf: ring[ringStart..<(ringStart + firstPart)])
        if firstPart < ringCount { out.append(contentsOf: ring[0..<(ringCount - firstPart)]) }
        return out
    }

    /// Bytes written but no longer retained.
    public var omittedCount: Int { totalWritten - retainedCount }

    /// The rendered output and its truncation metadata.
    ///
    /// Unlike the reference, when nothing was omitted the head and tail are joined as the
    /// contiguous original: no `"\n"` is invented at the seam. Once more was written than
    /// the head holds, the metadata is always there (the reference's tail is never empty
    /// then): between a skip and the next write the output is shown as it was before the
    /// skip (its tail, with the total of then), and a skip before any tail byte shows the
    /// head, the omitted marker and no tail.
    public func output() -> (bytes: [UInt8], truncation: OutputTruncation?) {
        if totalWritten == 0 { return ([], nil) }
        if head.count < headCapacity || totalWritten == head.count {
            return (truncateLines(head), nil)
        }
        let total = ringCount > 0 ? totalWritten - skippedAfterRing : totalWritten
        let omitted = total - head.count - ringCount
        let tail = ringBytes
        var rendered: [UInt8]
        if omitted > 0 {
            // No head (a restored output whose head was dropped with its spool's oldest
            // bytes): the marker opens the output.
            rendered = truncateLines(head)
            rendered.append(contentsOf: Array("\(head.isEmpty ? "" : "\n\n")... [omitted \(omitted) bytes] ...\n\n".utf8))
            rendered.append(contentsOf: truncateLines(tail))
        } else {
            rendered = truncateLines(head + tail)
        }
        let meta = OutputTruncation(
            originalBytes: total,
            retainedBytes: rendered.count,
            omittedBytes: omitted,
            strategy: OutputTruncation.headTailStrategy
        )
        return (rendered, meta)
    }

    /// Cuts every line longer than `maxLineLength` to that length, ending in the suffix.
    func truncateLines(_ bytes: [UInt8]) -> [UInt8] {
        if bytes.count <= maxLineLength { return bytes }
        let keep = maxLineLength - HeadTail.truncationSuffix.count
        var out = [UInt8]()
        out.reserveCapacity(min(bytes.count, maxLineLength * 16))
        var lineStart = 0
        let newline = UInt8(ascii: "\n")
        while lineStart <= bytes.count {
            let lineEnd = bytes[lineStart...].firstIndex(of: newline) ?? bytes.count
            if lineEnd - lineStart > maxLineLength {
                out.append(contentsOf: bytes[lineStart..<(lineStart + keep)])
                out.append(contentsOf: HeadTail.truncationSuffix)
            } else {
                out.append(contentsOf: bytes[lineStart..<lineEnd])
            }
            if lineEnd == bytes.count { break }
            out.append(newline)
            lineStart = lineEnd + 1
        }
        return out
    }
}

/// The `truncated` object of the output response; JSON keys are the reference's.
public struct OutputTruncation: Codable, Sendable, Equatable {
    public static let headTailStrategy = "head_tail"

    public var originalBytes: Int
    public var retainedBytes: Int
    public var omittedBytes: Int
    public var strategy: String

    enum CodingKeys: String, CodingKey {
        case originalBytes = "original_bytes"
        case retainedBytes = "retained_bytes"
        case omittedBytes = "omitted_bytes"
        case strategy
    }
}
