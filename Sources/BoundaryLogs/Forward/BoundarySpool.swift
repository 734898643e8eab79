import AgentCore
import CoreMetrics
import FoundationEssentials
import Glibc
import Logging

/// Batches that did not fit in memory, on disk under the state directory, in order:
/// segment files `NNNNNNNNNNNN.seg` of records `[length u32][crc32 u32][payload]`, at most
/// `maxBytes` in all. The oldest segment is read first; a record whose length or checksum is
/// wrong (a torn write) ends its segment, which is logged and skipped, never fatal.
/// Delivery is at least once: a crash between sending a record and deleting its segment
/// sends the segment's sent records again after the restart.
///
/// Not thread-safe: ``BoundaryForwarder`` calls it under its lock.
final class BoundarySpool {
    static let segmentBytes = 1 << 20
    static let recordHeader = 8

    let directory: String
    let maxBytes: Int
    private let logger: Logger
    /// Segment numbers on disk, oldest first, and their sizes.
    private var segments: [(number: Int64, size: Int)] = []
    /// The oldest segment's bytes and how far it has been read.
    private var reading: (number: Int64, bytes: [UInt8], offset: Int)?
    /// The newest segment, open for appending (one open per segment, not per record).
    private var appending: (number: Int64, fd: Int32)?

    init(directory: String, maxBytes: Int, logger: Logger) {
        self.directory = directory
        self.maxBytes = maxBytes
        self.logger = logger
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasSuffix(".seg") {
            guard let number = Int64(name.dropLast(4)) else { continue }
            let size = fileSize(atPath: path(number))
            segments.append((number, size))
        }
        segments.sort { $0.number < $1.number }
    }

    var isEmpty: Bool { segments.isEmpty }
    var totalBytes: Int { segments.reduce(0) { $0 + $1.size } }

    private func path(_ number: Int64) -> String { directory + "/" + zeroPadded(number, width: 12) + ".seg" }

    /// Appends one record to the newest segment (a new one past ``segmentBytes``); false
    /// when it would pass `maxBytes` or cannot be written.
    func append(_ payload: [UInt8]) -> Bool {
        let record = Self.record(payload)
        guard totalBytes + record.count <= maxBytes else { return false }
        if segments.isEmpty || segments[segments.count - 1].size + record.count > Self.segmentBytes
            || reading?.number == segments.last?.number
        {
            // A segment being read is not appended to (its bytes are already in memory).
            let next = (segments.last?.number ?? 1_000_000_000) + 1
            segments.append((next, 0))
        }
        let number = segments[segments.count - 1].number
        if appending?.number != number {
            closeAppending()
            let fd = open(path(number), O_WRONLY | O_CREAT | O_CLOEXEC | O_APPEND, 0o600)
            guard fd >= 0 else { return false }
            appending = (number, fd)
        }
        guard let fd = appending?.fd, Self.writeAll(record, to: fd) else { return false }
        segments[segments.count - 1].size += record.count
        return true
    }

    private func closeAppending() {
        if let appending { close(appending.fd) }
        appending = nil
    }

    deinit { closeAppending() }

    /// Writes `payloads` as a segment older than everything on disk (what memory held at
    /// shutdown comes before what was spooled).
    func prepend(_ payloads: [[UInt8]]) -> Int {
        guard !payloads.isEmpty else { return 0 }
        var bytes: [UInt8] = []
        var written = 0
        for payload in payloads {
            let record = Self.record(payload)
            guard totalBytes + bytes.count + record.count <= maxBytes else { break }
            bytes += record
            written += 1
        }
        let number = (segments.first?.number ?? 1_000_000_001) - 1
        guard written > 0, writeSegment(bytes, to: path(number)) else { return 0 }
        segments.insert((number, bytes.count), at: 0)
        return written
    }

    /// The oldest record not yet taken, or nil when the spool is empty.
    func next() -> [UInt8]? {
        while let oldest = segments.first {
            if reading?.number != oldest.number {
                let data = FileManager.default.contents(atPath: path(oldest.number)) ?? Data()
                reading = (oldest.number, [UInt8](data), 0)
            }
            guard var current = reading else { return nil }
            if current.offset + Self.recordHeader <= current.bytes.count {
                let length = Int(Self.uint32(current.bytes, at: current.offset))
                let checksum = Self.uint32(current.bytes, at: current.offset + 4)
                let start = current.offset + Self.recordHeader
                if length <= 1 << 20, start + length <= current.bytes.count {
                    let payload = Array(current.bytes[start..<(start + length)])
                    if CRC32.checksum(payload) == checksum {
                        current.offset = start + length
                        reading = current
                        return payload
                    }
                }
                logger.warning("boundary log spool segment is torn; the rest of it is skipped", metadata: ["segment": "\(path(oldest.number))"])
                BoundaryMetrics.spoolCorrupt.increment()
            }
            // Segment done (or torn): remove it and go on with the next.
            if appending?.number == oldest.number { closeAppending() }
            unlink(path(oldest.number))
            segments.removeFirst()
            reading = nil
        }
        return nil
    }

    /// Writes a whole segment file (appends go through the open newest segment).
    private func writeSegment(_ bytes: [UInt8], to path: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_TRUNC, 0o600)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return Self.writeAll(bytes, to: fd)
    }

    private static func writeAll(_ bytes: [UInt8], to fd: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    static func record(_ payload: [UInt8]) -> [UInt8] {
        bigEndian(UInt32(payload.count)) + bigEndian(CRC32.checksum(payload)) + payload
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    private static func uint32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }
}

/// CRC-32 (IEEE), for spool records.
enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var value = UInt32(index)
        for _ in 0..<8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
        return value
    }

    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}
