import AgentCore
import CoreMetrics
import FoundationEssentials
import Glibc
import Logging

/// Batches that did not fit in memory, on disk under the state directory, in order:
/// segment files `NNNNNNNNNNNN.seg` of records `[length u32][crc32 u32][payload]`, at most
/// `maxBytes` in all. The oldest segment is read first; a record whose length or checksum is
/// wrong (a torn write) ends its segment, which is logged and skipped, never fatal.
///
/// Delivery is at least once, and exactly once across a clean shutdown. A segment read to
/// its end stays on disk until each record taken from it is settled (``settle(segment:)``:
/// forwarded or refused), so a crash sends those records again after the restart instead of
/// losing them. At shutdown ``checkpoint(prepending:)`` writes what memory holds ahead of
/// everything and drops from disk what was read into memory, so nothing read before is
/// sent twice.
///
/// Not thread-safe: ``BoundaryForwarder`` calls it under its lock.
final class BoundarySpool {
    static let segmentBytes = 1 << 20
    static let recordHeader = 8
    /// The largest record read back: a batch is at most one boundary frame (32 KiB).
    static let maxRecordBytes = 1 << 20

    let directory: String
    let maxBytes: Int
    private let logger: Logger
    /// Segment numbers on disk, oldest first, and their sizes.
    private var segments: [(number: Int64, size: Int)] = []
    /// The segment being read: its bytes and how far it has been read.
    private var reading: (number: Int64, bytes: [UInt8], offset: Int)?
    /// Segments read to their end (or torn) whose taken records are not all settled yet.
    private var exhausted: Set<Int64> = []
    /// Records taken and not yet settled, by segment (at most the forwarder's memory queue).
    private var held: [Int64: Int] = [:]
    /// The newest segment, open for appending (one open per segment, not per record).
    private var appending: (number: Int64, fd: Int32)?
    /// Segments never appended to again: one a write failed in (its end may hold a torn
    /// record, which ends its reading: a record after it would be skipped), and those found
    /// at start (their end may be a crash's torn write).
    private var sealed: Set<Int64> = []

    init(directory: String, maxBytes: Int, logger: Logger) {
        self.directory = directory
        self.maxBytes = maxBytes
        self.logger = logger
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasSuffix(".seg") {
            // Only the names the spool writes (12 digits): a stray name near Int64's ends
            // would trap the next segment's number.
            guard name.count == 16, let number = Int64(name.dropLast(4)), number >= 0 else { continue }
            let size = fileSize(atPath: path(number))
            segments.append((number, size))
        }
        segments.sort { $0.number < $1.number }
        sealed = Set(segments.map(\.number))
    }

    /// No record left to read (records taken and not settled may still be on disk).
    var isEmpty: Bool { segments.allSatisfy { exhausted.contains($0.number) } }
    var totalBytes: Int { segments.reduce(0) { $0 + $1.size } }

    private func path(_ number: Int64) -> String { directory + "/" + zeroPadded(number, width: 12) + ".seg" }

    /// Appends one record to the newest segment (a new one past ``segmentBytes``, or when
    /// the newest is being read); false when it would pass `maxBytes` or cannot be written.
    func append(_ payload: [UInt8]) -> Bool {
        let record = Self.record(payload)
        guard totalBytes + record.count <= maxBytes else { return false }
        if let last = segments.last?.number, reading?.number != last, !exhausted.contains(last), !sealed.contains(last),
            segments[segments.count - 1].size + record.count <= Self.segmentBytes
        {
            // The newest segment takes it.
        } else {
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
        guard let fd = appending?.fd, Self.writeAll(record, to: fd) else {
            // What was written of it (if anything) stays at the end of this segment, where
            // it ends the reading: later records go to a new one.
            sealed.insert(number)
            closeAppending()
            return false
        }
        segments[segments.count - 1].size += record.count
        return true
    }

    private func closeAppending() {
        if let appending { close(appending.fd) }
        appending = nil
    }

    deinit { closeAppending() }

    /// The oldest record not yet taken and the segment it came from (to settle it by), or
    /// nil when none is left.
    func next() -> (payload: [UInt8], segment: Int64)? {
        while let oldest = segments.first(where: { !exhausted.contains($0.number) }) {
            if reading?.number != oldest.number {
                let data = FileManager.default.contents(atPath: path(oldest.number)) ?? Data()
                reading = (oldest.number, [UInt8](data), 0)
            }
            guard var current = reading else { return nil }
            if current.offset + Self.recordHeader <= current.bytes.count {
                let length = Int(Self.uint32(current.bytes, at: current.offset))
                let checksum = Self.uint32(current.bytes, at: current.offset + 4)
                let start = current.offset + Self.recordHeader
                if length <= Self.maxRecordBytes, start + length <= current.bytes.count {
                    let payload = Array(current.bytes[start..<(start + length)])
                    if CRC32.checksum(payload) == checksum {
                        current.offset = start + length
                        reading = current
                        held[oldest.number, default: 0] += 1
                        return (payload, oldest.number)
                    }
                }
                logger.warning("boundary log spool segment is torn; the rest of it is skipped", metadata: ["segment": "\(path(oldest.number))"])
                BoundaryMetrics.spoolCorrupt.increment()
            }
            // Read to its end (or torn): removed once what was taken from it is settled.
            reading = nil
            exhausted.insert(oldest.number)
            if held[oldest.number] == nil { remove(oldest.number) }
        }
        return nil
    }

    /// A record taken from `segment` was forwarded or refused: its segment goes once read to
    /// its end with every taken record settled.
    func settle(segment: Int64) {
        guard let count = held[segment] else { return }
        if count > 1 {
            held[segment] = count - 1
        } else {
            held[segment] = nil
            if exhausted.contains(segment) { remove(segment) }
        }
    }

    private func remove(_ number: Int64) {
        if appending?.number == number { closeAppending() }
        unlink(path(number))
        segments.removeAll { $0.number == number }
        exhausted.remove(number)
        sealed.remove(number)
        held[number] = nil
    }

    /// At shutdown: writes `payloads` (what memory holds, every record taken from the spool
    /// and not settled among them) as a segment older than everything, then drops what was
    /// read into memory: the segments read to their end, and the read part of the segment
    /// being read. Returns how many payloads were written (those past `maxBytes` are not), or
    /// nil when the segment could not be written: then nothing was dropped either, and the
    /// records taken from the spool are still on disk for the next start.
    /// A crash in between sends some records twice, never loses one.
    func checkpoint(prepending payloads: [[UInt8]]) -> Int? {
        let readBytes =
            segments.filter { exhausted.contains($0.number) }.reduce(0) { $0 + $1.size } + (reading?.offset ?? 0)
        var bytes: [UInt8] = []
        var written = 0
        for payload in payloads {
            let record = Self.record(payload)
            guard totalBytes - readBytes + bytes.count + record.count <= maxBytes else { break }
            bytes += record
            written += 1
        }
        if written > 0 {
            let number = (segments.first?.number ?? 1_000_000_001) - 1
            guard writeSegment(bytes, to: path(number)) else { return nil }
            segments.insert((number, bytes.count), at: 0)
        }
        for number in exhausted { remove(number) }
        if let current = reading, current.offset > 0 {
            let rest = Array(current.bytes[current.offset...])
            if rest.isEmpty {
                remove(current.number)
            } else if writeSegment(rest, to: path(current.number) + ".tmp"), rename(path(current.number) + ".tmp", path(current.number)) == 0,
                let index = segments.firstIndex(where: { $0.number == current.number })
            {
                if appending?.number == current.number { closeAppending() }
                segments[index].size = rest.count
            }
        }
        reading = nil
        held = [:]
        return written
    }

    /// Writes a whole segment file (appends go through the open newest segment); one it
    /// opened and could not write whole is removed (read back, it would be a torn segment).
    private func writeSegment(_ bytes: [UInt8], to path: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_TRUNC, 0o600)
        guard fd >= 0 else { return false }
        let written = Self.writeAll(bytes, to: fd)
        close(fd)
        if !written { unlink(path) }
        return written
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
