#if canImport(Glibc)
import Glibc
#endif

/// One Server-Sent Event: its type (`message` when the stream names none), its data (the
/// `data:` lines joined with newlines) and its id.
public struct SSEEvent: Sendable, Equatable {
    public var type: String
    public var data: [UInt8]
    public var id: String?

    public init(type: String, data: [UInt8], id: String? = nil) {
        self.type = type
        self.data = data
        self.id = id
    }
}

/// Splits a `text/event-stream` body into events as the HTML Server-Sent Events rules read
/// it: lines end with LF, CRLF or CR; `data`, `event` and `id` fields; comments (`:`) and
/// other fields ignored; an event is dispatched at an empty line, and one without data is
/// dropped; an unfinished event at the end of the stream is dropped.
///
/// Memory: the line being read and the data of the event being built together never exceed
/// ``maxEventBytes`` plus ``fieldSlack`` bytes whatever the chunks; past it the decoder
/// fails for good (there is no resynchronising on a peer that sends unbounded events).
public struct SSEDecoder: Sendable {
    public struct EventTooLong: Error, Sendable, Equatable, CustomStringConvertible {
        public var limit: Int
        public var description: String { "message longer than \(limit) bytes" }
    }

    /// Room for a field's name and separator (`data: `) on top of the data bound.
    public static let fieldSlack = 16
    /// The longest event id kept; a longer one is ignored.
    public static let maxIDBytes = 1024

    public let maxEventBytes: Int
    private var line: [UInt8] = []
    private var data: [UInt8] = []
    private var hasData = false
    private var type = ""
    private var id: String?
    /// The last chunk ended with CR: an LF starting the next one belongs to it.
    private var afterCR = false
    private var failed = false

    public init(maxEventBytes: Int = MCPLimits.maxMessageBytes) {
        self.maxEventBytes = maxEventBytes
    }

    /// Bytes held: the unfinished line and the data of the unfinished event.
    public var bufferedBytes: Int { line.count + data.count }
    /// Bytes allocated for them (what they cost in memory).
    public var bufferedCapacity: Int { line.capacity + data.capacity }

    /// Feeds a chunk; `event` is called with each complete event, in order.
    public mutating func feed(_ chunk: UnsafeRawBufferPointer, event: (SSEEvent) -> Void) throws(EventTooLong) {
        if failed { throw EventTooLong(limit: maxEventBytes) }
        var start = 0
        // An empty chunk leaves a CR pending: only the next byte tells CRLF from CR.
        if afterCR, let first = chunk.first {
            if first == UInt8(ascii: "\n") { start = 1 }
            afterCR = false
        }
        while start < chunk.count {
            var end = Self.lineEnd(chunk, from: start)
            if line.count + data.count + (end - start) > maxEventBytes + Self.fieldSlack { return try fail() }
            line.append(contentsOf: chunk[start..<end])
            guard end < chunk.count else { return }
            if chunk[end] == UInt8(ascii: "\r") {
                if end + 1 < chunk.count {
                    if chunk[end + 1] == UInt8(ascii: "\n") { end += 1 }
                } else {
                    afterCR = true
                }
            }
            try process(event: event)
            start = end + 1
        }
    }

    /// Convenience for tests and fuzzing: feeds bytes from an array.
    public mutating func feed(_ bytes: [UInt8], event: (SSEEvent) -> Void) throws(EventTooLong) {
        var thrown: EventTooLong?
        bytes.withUnsafeBytes { buffer in
            do throws(EventTooLong) { try feed(buffer, event: event) } catch { thrown = error }
        }
        if let thrown { throw thrown }
    }

    /// The index of the first CR or LF at or after `start` (the chunk's count when none), by
    /// `memchr`: an endless stream of comments is scanned at memory speed, also in a debug build.
    static func lineEnd(_ chunk: UnsafeRawBufferPointer, from start: Int) -> Int {
        guard let base = chunk.baseAddress, start < chunk.count else { return chunk.count }
        let count = chunk.count - start
        let lf = memchr(base + start, 0x0a, count).map { $0 - UnsafeMutableRawPointer(mutating: base) } ?? chunk.count
        let cr = memchr(base + start, 0x0d, lf - start).map { $0 - UnsafeMutableRawPointer(mutating: base) } ?? lf
        return min(lf, cr)
    }

    /// Handles the complete line in `line`.
    private mutating func process(event: (SSEEvent) -> Void) throws(EventTooLong) {
        defer { line.removeAll(keepingCapacity: line.count <= 4096) }
        if line.isEmpty {
            if hasData {
                if data.count > maxEventBytes { return try fail() }
                event(SSEEvent(type: type.isEmpty ? "message" : type, data: data, id: id))
            }
            data = []
            hasData = false
            type = ""
            return
        }
        if line[0] == UInt8(ascii: ":") { return }
        let colon = line.firstIndex(of: UInt8(ascii: ":")) ?? line.count
        var valueStart = min(colon + 1, line.count)
        if valueStart < line.count, line[valueStart] == UInt8(ascii: " ") { valueStart += 1 }
        let value = line[valueStart...]
        switch colon <= 5 ? String(decoding: line[..<colon], as: UTF8.self) : "" {
        case "data":
            if hasData { data.append(UInt8(ascii: "\n")) }
            data.append(contentsOf: value)
            hasData = true
            if data.count > maxEventBytes { return try fail() }
        case "event":
            type = String(decoding: value.prefix(256), as: UTF8.self)
        case "id":
            if !value.contains(0), value.count <= Self.maxIDBytes { id = String(decoding: value, as: UTF8.self) }
        default:
            break
        }
    }

    private mutating func fail() throws(EventTooLong) {
        failed = true
        line = []
        data = []
        throw EventTooLong(limit: maxEventBytes)
    }
}
