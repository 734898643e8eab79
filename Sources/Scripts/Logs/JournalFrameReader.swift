#if canImport(Glibc)
import Glibc
#endif

/// Reads ``UploadJournal`` record frames — `[payload length u32 LE][CRC-32C of payload
/// u32 LE][payload]` — in order from `offset` up to `end` of an open file, with `pread`
/// through one reusable window, checking each frame's length and checksum.
///
/// Memory: the window, `max(chunkBytes, 8 + maxPayloadBytes)` at most, plus the payloads
/// handed out. Not thread-safe; the journal uses it under its lock.
struct JournalFrameReader {
    static let frameHeaderBytes = 8

    /// The outcome of one ``next(copy:admit:)``.
    enum Step: Equatable {
        /// The next frame is whole and its checksum matches; `payload` is empty unless
        /// asked for. ``offset`` is now past it.
        case record(payload: [UInt8])
        /// `admit` declined the next frame's length; ``offset`` has not moved.
        case declined
        /// ``offset`` is at `end`.
        case end
        /// The frame at ``offset`` is torn, too long or fails its checksum.
        case corrupt
        /// `pread` failed (errno).
        case failed(Int32)
    }

    let fd: Int32
    /// The file offset of the next frame.
    private(set) var offset: Int
    let end: Int
    let chunkBytes: Int
    let maxPayloadBytes: Int

    private var window: [UInt8] = []
    private var windowStart = 0
    private var windowCount = 0

    init(fd: Int32, offset: Int, end: Int, chunkBytes: Int, maxPayloadBytes: Int) {
        self.fd = fd
        self.offset = offset
        self.end = end
        self.chunkBytes = chunkBytes
        self.maxPayloadBytes = maxPayloadBytes
    }

    /// The next frame, if `admit(payloadLength)` agrees; `copy` asks for the payload bytes.
    mutating func next(copy: Bool, admit: (Int) -> Bool = { _ in true }) -> Step {
        guard offset < end else { return .end }
        guard offset + Self.frameHeaderBytes <= end else { return .corrupt }
        if let failure = fill(Self.frameHeaderBytes) { return failure }
        let (length, checksum) = window.withUnsafeBytes { bytes in
            let at = offset - windowStart
            return (
                Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt32.self))),
                UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: at + 4, as: UInt32.self))
            )
        }
        guard length <= maxPayloadBytes, offset + Self.frameHeaderBytes + length <= end else { return .corrupt }
        guard admit(length) else { return .declined }
        if let failure = fill(Self.frameHeaderBytes + length) { return failure }
        let start = offset + Self.frameHeaderBytes - windowStart
        let (valid, payload) = window.withUnsafeBytes { bytes in
            let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<(start + length)])
            return (CRC32C.checksum(slice) == checksum, copy ? [UInt8](slice) : [])
        }
        guard valid else { return .corrupt }
        offset += Self.frameHeaderBytes + length
        return .record(payload: payload)
    }

    /// Makes the window hold `[offset, offset + count)`; nil when it does.
    private mutating func fill(_ count: Int) -> Step? {
        if offset >= windowStart && offset + count <= windowStart + windowCount { return nil }
        let size = min(end - offset, max(count, chunkBytes))
        if window.count < size { window = [UInt8](repeating: 0, count: size) }
        var done = 0
        while done < size {
            let result = window.withUnsafeMutableBytes { bytes in
                pread(fd, bytes.baseAddress! + done, size - done, off_t(offset + done))
            }
            if result < 0 {
                if errno == EINTR { continue }
                windowCount = 0
                return .failed(errno)
            }
            if result == 0 {
                windowCount = 0
                return .corrupt  // The file is shorter than its recorded end.
            }
            done += result
        }
        windowStart = offset
        windowCount = size
        return nil
    }
}
