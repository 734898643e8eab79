#if canImport(Glibc)
import Glibc
#endif

/// Splits a byte stream into newline-delimited messages, holding at most one unfinished
/// message of ``maxLineBytes`` (and the CR that may end it), whatever the chunks.
///
/// A trailing `\r` is dropped (a server on a CRLF platform) and empty lines are skipped. A
/// line longer than the bound is an error that ends the stream: there is no resynchronising
/// on a peer that writes unbounded lines.
public struct JSONLineDecoder: Sendable {
    public struct LineTooLong: Error, Sendable, Equatable, CustomStringConvertible {
        public var limit: Int
        public var description: String { "message longer than \(limit) bytes" }
    }

    public let maxLineBytes: Int
    private var pending: [UInt8] = []
    private var failed = false

    public init(maxLineBytes: Int = MCPLimits.maxMessageBytes) {
        self.maxLineBytes = maxLineBytes
    }

    /// Bytes of the unfinished line held.
    public var bufferedBytes: Int { pending.count }
    /// Bytes allocated for the unfinished line (what it costs in memory).
    public var bufferedCapacity: Int { pending.capacity }

    /// The most ``bufferedCapacity`` can be after feeding `count` more bytes: the unfinished
    /// line grows by doubling (see ``grow(toHold:)``), so a holder can charge it first.
    public func capacity(afterFeeding count: Int) -> Int {
        let needed = pending.count + count
        return needed <= pending.capacity ? pending.capacity : max(needed, 2 * pending.capacity)
    }

    /// Feeds a chunk; `line` is called with each complete line, in order.
    public mutating func feed(_ chunk: UnsafeRawBufferPointer, line: ([UInt8]) -> Void) throws(LineTooLong) {
        if failed { throw LineTooLong(limit: maxLineBytes) }
        var start = 0
        while start < chunk.count {
            guard let newline = Self.newline(chunk, from: start) else {
                let rest = chunk.count - start
                // One byte more than the bound may be the CR of a CRLF, which is not counted.
                if pending.count + rest > maxLineBytes + 1 { return try fail() }
                grow(toHold: pending.count + rest)
                pending.append(contentsOf: chunk[start...])
                return
            }
            if pending.count + (newline - start) > maxLineBytes + 1 { return try fail() }
            var message: [UInt8]
            if pending.isEmpty {
                message = Array(chunk[start..<newline])
            } else {
                grow(toHold: pending.count + (newline - start))
                pending.append(contentsOf: chunk[start..<newline])
                message = pending
                pending = []
            }
            if message.last == UInt8(ascii: "\r") { message.removeLast() }
            if message.count > maxLineBytes { return try fail() }
            if !message.isEmpty { line(message) }
            start = newline + 1
        }
    }

    /// Convenience for tests and fuzzing: feeds bytes from an array.
    public mutating func feed(_ bytes: [UInt8], line: ([UInt8]) -> Void) throws(LineTooLong) {
        var thrown: LineTooLong?
        bytes.withUnsafeBytes { buffer in
            do throws(LineTooLong) { try feed(buffer, line: line) } catch { thrown = error }
        }
        if let thrown { throw thrown }
    }

    /// The index of the next LF at or after `start`, by `memchr` (fast in a debug build too).
    static func newline(_ chunk: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard let base = chunk.baseAddress, start < chunk.count else { return nil }
        return memchr(base + start, 0x0a, chunk.count - start).map { $0 - UnsafeMutableRawPointer(mutating: base) }
    }

    /// Doubles the unfinished line's buffer (or more when one chunk needs it), so that its
    /// capacity is what ``capacity(afterFeeding:)`` says.
    private mutating func grow(toHold count: Int) {
        guard count > pending.capacity else { return }
        pending.reserveCapacity(max(count, 2 * pending.capacity))
    }

    private mutating func fail() throws(LineTooLong) {
        failed = true
        pending = []
        throw LineTooLong(limit: maxLineBytes)
    }
}
