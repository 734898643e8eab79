import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A durable FIFO of byte records on disk, so that script output bound for the control
/// plane survives control-plane outages and agent crashes or restarts (the reference keeps
/// it in memory and loses it). Records are handed out oldest first by ``peek(maxRecords:maxBytes:)``
/// and, once ``acknowledge(through:)`` returns, never again, also after reopening.
///
/// Files, in `directory` (created 0700), each 0600:
/// - `<name>.journal`: a 16-byte header (`"CJN1"`, 4 reserved bytes, the generation u64 LE)
///   then frames `[payload length u32 LE][CRC-32C of payload u32 LE][payload]`.
/// - `<name>.cursor`: 24 bytes (`"CJC1"`, CRC-32C of the rest, generation u64, file offset
///   u64 of the first unacknowledged frame), rewritten in place by one `pwrite`. Chosen over
///   write-temporary-and-rename because an acknowledgement is then one system call and no
///   directory update; a 24-byte `pwrite` at offset 0 lies within one page and cannot be torn
///   by a process crash (the kernel copies it into the page cache whole; a fatal signal is
///   only looked at between pages or on return from the call), and a garbled cursor (power loss) fails its checksum and means
///   "deliver everything again" (duplicates, never loss). It also carries the lock that
///   keeps a second agent (or a second journal in this process) off the same files: a
///   ``ProcessFileLock``, which a spawned child cannot keep after the journal is closed.
/// - `<name>.journal.tmp`: only during compaction; a leftover one is deleted at open.
///
/// Durability: no `fsync`. What `write` put in the page cache survives the process
/// crashing or being killed, which is the case this guards against; a kernel crash or power
/// loss may lose the latest records, resend acknowledged ones or leave a torn tail (cut
/// away at open).
///
/// Recovery at open: the frames after the cursor are checked; the first torn or corrupt
/// one and everything after it are truncated away (``recoveredTruncations``); a cursor past
/// the end of the file means everything was acknowledged (a crash inside compaction, see
/// ``compactIfNeeded(_:)``); a cursor of another generation means the file was rewritten by
/// a compaction whose cursor update did not happen, so the whole file is unacknowledged.
///
/// Bounds: the unacknowledged frames (``pendingBytes``, frame headers included) never pass
/// `capacityBytes` through ``append(_:)``; the data file stays below
/// `16 + 2 × capacityBytes + 1 MiB` (the acknowledged prefix is compacted away once it is
/// above 1 MiB and above the unacknowledged part), plus a temporary copy of at most
/// `16 + capacityBytes` during compaction. One record is at most ``maxRecordBytes``.
/// Memory: counters, the waiters of ``waitForRecords()``, and per call the batch being
/// handed out plus a read window of ``readChunkBytes`` (or one record) or a copy buffer of
/// ``copyChunkBytes``; the file is never read whole.
///
/// Thread-safe: one lock around every file operation (appends from every script stream,
/// one consumer peeking and acknowledging). A compaction copies the unacknowledged tail
/// under that lock, holding appends up for the time it takes to copy at most
/// `capacityBytes` from the page cache.
final class UploadJournal: Sendable {
    /// Where the stream of records stands, in bytes and records since this journal was
    /// opened; only meaningful for the journal that handed it out.
    struct Position: Comparable, Hashable, Sendable {
        let offset: UInt64
        let index: UInt64

        static func < (lhs: Position, rhs: Position) -> Bool { lhs.offset < rhs.offset }
    }

    /// The oldest unacknowledged records, in order.
    struct Batch: Sendable {
        let records: [[UInt8]]
        /// Before the first record.
        let start: Position
        /// After the last record.
        let end: Position

        /// After the first `count` records (clamped to `0...records.count`), to acknowledge
        /// part of the batch.
        func position(after count: Int) -> Position {
            let count = min(max(count, 0), records.count)
            var offset = start.offset
            for record in records[0..<count] { offset += UInt64(JournalFrameReader.frameHeaderBytes + record.count) }
            return Position(offset: offset, index: start.index + UInt64(count))
        }
    }

    /// Why the journal could not be opened.
    enum OpenError: Error, Equatable {
        case invalidName(String)
        /// Another process (or journal in this one) holds it.
        case locked(String)
        case system(call: String, errno: Int32)
    }

    static let headerBytes = 16
    static let cursorBytes = 24
    static let maxRecordBytes = 16 << 20
    /// The acknowledged prefix is copied away only above this size (and above the rest).
    static let compactionThresholdBytes = 1 << 20
    static let readChunkBytes = 256 << 10
    static let copyChunkBytes = 1 << 20
    private static let dataMagic: [UInt8] = Array("CJN1".utf8)
    private static let cursorMagic: [UInt8] = Array("CJC1".utf8)

    let directory: String
    let name: String
    let capacityBytes: Int
    let dataPath: String
    let cursorPath: String
    let temporaryPath: String

    private struct State {
        var dataFD: Int32
        var cursorFD: Int32
        var generation: UInt64
        /// File offsets: the first unacknowledged frame, the end of the last whole frame.
        var fileCursor: Int
        var fileEnd: Int
        /// The logical offset (``Position/offset``) of file offset ``headerBytes``.
        var base: UInt64 = 0
        var ackedIndex: UInt64 = 0
        var endIndex: UInt64 = 0
        var refused = 0
        var writeFailures = 0
        var recoveredTruncations = 0
        var compactions = 0
        var closed = false
        var nextWaiterID: UInt64 = 0
        /// At most one per task waiting in ``waitForRecords()``.
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]

        func logical(_ fileOffset: Int) -> UInt64 { base + UInt64(fileOffset - UploadJournal.headerBytes) }
        func fileOffset(_ logical: UInt64) -> Int { UploadJournal.headerBytes + Int(logical - base) }
        var acked: Position { Position(offset: logical(fileCursor), index: ackedIndex) }
        var end: Position { Position(offset: logical(fileEnd), index: endIndex) }
    }

    private let state: Mutex<State>

    init(directory: String, name: String, capacityBytes: Int) throws(OpenError) {
        guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else { throw .invalidName(name) }
        self.directory = directory
        self.name = name
        self.capacityBytes = max(0, capacityBytes)
        dataPath = directory + "/" + name + ".journal"
        cursorPath = directory + "/" + name + ".cursor"
        temporaryPath = dataPath + ".tmp"
        state = Mutex(try Self.open(directory: directory, dataPath: dataPath, cursorPath: cursorPath, temporaryPath: temporaryPath))
    }

    deinit {
        state.withLock { state in
            guard !state.closed else { return }
            Glibc.close(state.dataFD)
            ProcessFileLock.close(state.cursorFD)
        }
    }

    /// Closes the files (releasing the lock on them); afterwards appends are refused,
    /// ``peek(maxRecords:maxBytes:)`` finds nothing and waiters return.
    func close() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard !state.closed else { return [] }
            state.closed = true
            Glibc.close(state.dataFD)
            ProcessFileLock.close(state.cursorFD)
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    // MARK: - Counters

    /// Records appended and not yet acknowledged.
    var pendingRecords: Int { state.withLock { Int($0.endIndex - $0.ackedIndex) } }
    /// Their bytes on disk, 8-byte frame headers included (what `capacityBytes` bounds).
    var pendingBytes: Int { state.withLock { $0.fileEnd - $0.fileCursor } }
    /// Records refused by ``append(_:)`` (capacity, size, closed journal or write error).
    var refused: Int { state.withLock { $0.refused } }
    /// Appends whose `pwrite` failed (their records are counted in ``refused`` too).
    var writeFailures: Int { state.withLock { $0.writeFailures } }
    /// Torn or corrupt tails cut away (at open, or found later by a read).
    var recoveredTruncations: Int { state.withLock { $0.recoveredTruncations } }
    /// Compactions done (either kind), since open.
    var compactions: Int { state.withLock { $0.compactions } }
    /// The data file's size.
    var fileBytes: Int { state.withLock { $0.fileEnd } }

    // MARK: - Appending

    /// Appends one record; false when refused.
    @discardableResult
    func append(_ record: [UInt8]) -> Bool {
        append([record]) == 1
    }

    /// Appends `records` in order with one `pwrite`, returns how many were accepted: a
    /// prefix, cut at the first record that is over ``maxRecordBytes`` or would take the
    /// unacknowledged bytes past `capacityBytes`; the rest are counted in ``refused``.
    @discardableResult
    func append(_ records: [[UInt8]]) -> Int {
        guard !records.isEmpty else { return 0 }
        // Framed (and checksummed) outside the lock.
        var sizes: [Int] = []
        sizes.reserveCapacity(records.count)
        var total = 0
        for record in records {
            guard record.count <= Self.maxRecordBytes else { break }
            sizes.append(JournalFrameReader.frameHeaderBytes + record.count)
            total += JournalFrameReader.frameHeaderBytes + record.count
        }
        let framed = [UInt8](unsafeUninitializedCapacity: total) { buffer, initialized in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            var at = 0
            for (record, size) in zip(records, sizes) {
                record.withUnsafeBytes { payload in
                    raw.storeBytes(of: UInt32(payload.count).littleEndian, toByteOffset: at, as: UInt32.self)
                    raw.storeBytes(of: CRC32C.checksum(payload).littleEndian, toByteOffset: at + 4, as: UInt32.self)
                    if payload.count > 0 {
                        UnsafeMutableRawBufferPointer(rebasing: raw[(at + 8)..<(at + size)]).copyMemory(from: payload)
                    }
                }
                at += size
            }
            initialized = total
        }
        let (accepted, waiters) = state.withLock { state -> (Int, [CheckedContinuation<Void, Never>]) in
            var accepted = 0
            var bytes = 0
            if !state.closed {
                let room = capacityBytes - (state.fileEnd - state.fileCursor)
                for size in sizes {
                    guard bytes + size <= room else { break }
                    bytes += size
                    accepted += 1
                }
            }
            if accepted > 0 {
                let written = framed.withUnsafeBytes { Self.pwriteFully(state.dataFD, UnsafeRawBufferPointer(rebasing: $0[0..<bytes]), at: state.fileEnd) }
                if written {
                    state.fileEnd += bytes
                    state.endIndex += UInt64(accepted)
                } else {
                    // No torn frame may stay in the middle of the file: later appends would
                    // follow it and be cut away with it at the next open.
                    _ = ftruncate(state.dataFD, off_t(state.fileEnd))
                    state.writeFailures += 1
                    accepted = 0
                }
            }
            state.refused += records.count - accepted
            guard accepted > 0, !state.waiters.isEmpty else { return (accepted, []) }
            defer { state.waiters = [:] }
            return (accepted, Array(state.waiters.values))
        }
        for waiter in waiters { waiter.resume() }
        return accepted
    }

    // MARK: - Consuming

    /// The oldest unacknowledged records, in order: at most `maxRecords`, and at most
    /// `maxBytes` of payload unless the first record alone is larger (it then comes alone).
    /// Nil when there is none (or on a read error, to be retried). Handing out does not
    /// acknowledge: the same records come again until ``acknowledge(through:)``.
    func peek(maxRecords: Int, maxBytes: Int) -> Batch? {
        state.withLock { state -> Batch? in
            guard !state.closed, maxRecords > 0, state.fileCursor < state.fileEnd else { return nil }
            var reader = JournalFrameReader(
                fd: state.dataFD, offset: state.fileCursor, end: state.fileEnd,
                chunkBytes: min(Self.readChunkBytes, max(maxBytes, 0)) + JournalFrameReader.frameHeaderBytes * 64,
                maxPayloadBytes: Self.maxRecordBytes)
            var records: [[UInt8]] = []
            var bytes = 0
            reading: while records.count < maxRecords {
                switch reader.next(copy: true, admit: { records.isEmpty || bytes + $0 <= maxBytes }) {
                case .record(let payload):
                    records.append(payload)
                    bytes += payload.count
                case .declined, .end, .failed:
                    break reading
                case .corrupt:
                    // Only an outside hand can do this (appends never leave a torn frame):
                    // cut the file there so the journal does not stall on it for ever.
                    _ = ftruncate(state.dataFD, off_t(reader.offset))
                    state.fileEnd = reader.offset
                    state.endIndex = state.ackedIndex + UInt64(records.count)
                    state.recoveredTruncations += 1
                    break reading
                }
            }
            guard !records.isEmpty else { return nil }
            return Batch(records: records, start: state.acked, end: Position(offset: state.logical(reader.offset), index: state.ackedIndex + UInt64(records.count)))
        }
    }

    /// Marks everything up to `position` (from a ``Batch`` of this journal) as delivered
    /// and persists that before returning; a position at or before the current one (or not
    /// from this journal's unacknowledged range) changes nothing. Then compacts if due.
    func acknowledge(through position: Position) {
        state.withLock { state in
            guard !state.closed, position > state.acked, position <= state.end,
                position.index > state.ackedIndex, position.index <= state.endIndex
            else { return }
            state.fileCursor = state.fileOffset(position.offset)
            state.ackedIndex = position.index
            // Should this write fail, the records stay acknowledged in memory (they are not
            // handed out again by this process); a restart would deliver them again.
            Self.writeCursor(state.cursorFD, generation: state.generation, offset: state.fileCursor)
            compactIfNeeded(&state)
        }
    }

    /// Acknowledges everything appended so far.
    func discardAll() {
        acknowledge(through: state.withLock { $0.end })
    }

    /// Returns once there are unacknowledged records (at once if there are), the journal
    /// is closed, or the calling task is cancelled. Woken by ``append(_:)``; no polling.
    func waitForRecords() async {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Cancellation sets the task's flag before running the handler below, and both
                // take the lock: either this sees the flag, or the handler finds the waiter.
                let now = state.withLock { state -> Bool in
                    if state.closed || state.fileCursor < state.fileEnd || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    // MARK: - Compaction

    /// Two kinds, after an acknowledgement:
    ///
    /// 1. Everything acknowledged (and the file not empty): truncate the data file to its
    ///    header, bump the header's generation, then write the cursor `(generation, 16)`.
    ///    A crash after the truncation leaves an old cursor past the end of the file, read
    ///    at open as "everything acknowledged"; a crash after the header write leaves a
    ///    cursor of the old generation, read as "deliver the whole file" — which is empty.
    ///    The reverse order (cursor first) would, after a crash between the steps, deliver
    ///    every acknowledged record again. The generation bump also covers a cursor write
    ///    that fails while the agent runs on: the next open delivers again rather than
    ///    trusting an offset into a file that has since been refilled.
    /// 2. The acknowledged prefix above ``compactionThresholdBytes`` and above the rest:
    ///    copy the unacknowledged frames (at most `capacityBytes`) behind a header of the
    ///    next generation into `<name>.journal.tmp`, rename it over the data file, then
    ///    write the cursor `(generation + 1, 16)`. A crash before the rename leaves the old
    ///    file and cursor intact (the temporary file is deleted at open); a crash after it
    ///    leaves a cursor of the old generation, read as "the whole new file is
    ///    unacknowledged", which is exactly what was copied.
    private func compactIfNeeded(_ state: inout State) {
        let acknowledged = state.fileCursor - Self.headerBytes
        if state.fileCursor == state.fileEnd {
            guard state.fileEnd > Self.headerBytes, ftruncate(state.dataFD, off_t(Self.headerBytes)) == 0 else { return }
            state.base = state.logical(state.fileEnd)
            state.fileCursor = Self.headerBytes
            state.fileEnd = Self.headerBytes
            if Self.writeHeader(state.dataFD, generation: state.generation &+ 1) { state.generation &+= 1 }
            Self.writeCursor(state.cursorFD, generation: state.generation, offset: Self.headerBytes)
            state.compactions += 1
        } else if acknowledged > Self.compactionThresholdBytes && acknowledged > state.fileEnd - state.fileCursor {
            let generation = state.generation &+ 1
            _ = unlink(temporaryPath)
            let fd = Glibc.open(temporaryPath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return }
            guard Self.writeHeader(fd, generation: generation),
                Self.copy(from: state.dataFD, range: state.fileCursor..<state.fileEnd, to: fd, at: Self.headerBytes),
                rename(temporaryPath, dataPath) == 0
            else {
                Glibc.close(fd)
                _ = unlink(temporaryPath)
                return
            }
            Glibc.close(state.dataFD)
            state.dataFD = fd
            state.generation = generation
            state.base = state.logical(state.fileCursor)
            state.fileEnd = Self.headerBytes + (state.fileEnd - state.fileCursor)
            state.fileCursor = Self.headerBytes
            Self.writeCursor(state.cursorFD, generation: generation, offset: Self.headerBytes)
            state.compactions += 1
        }
    }

    // MARK: - Opening

    private static func open(directory: String, dataPath: String, cursorPath: String, temporaryPath: String) throws(OpenError) -> State {
        try makeDirectories(directory)
        // A record lock, not a flock: a child spawned by any thread shares our open file
        // descriptions until it execs, and would keep a flock of a journal closed meanwhile.
        let cursorFD: Int32
        do throws(ProcessFileLock.Failure) {
            cursorFD = try ProcessFileLock.open(cursorPath, mode: 0o600)
        } catch {
            switch error {
            case .held: throw .locked(cursorPath)
            case .system(let call, let code): throw .system(call: "\(call) \(cursorPath)", errno: code)
            }
        }
        _ = unlink(temporaryPath)
        let dataFD = Glibc.open(dataPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard dataFD >= 0 else {
            let code = errno
            ProcessFileLock.close(cursorFD)
            throw .system(call: "open \(dataPath)", errno: code)
        }
        do {
            return try recover(dataFD: dataFD, cursorFD: cursorFD)
        } catch {
            Glibc.close(dataFD)
            ProcessFileLock.close(cursorFD)
            throw error
        }
    }

    private static func recover(dataFD: Int32, cursorFD: Int32) throws(OpenError) -> State {
        var info = stat()
        guard fstat(dataFD, &info) == 0 else { throw .system(call: "fstat", errno: errno) }
        var size = Int(info.st_size)
        let cursor = readCursor(cursorFD)
        var truncations = 0
        var generation: UInt64
        var fileCursor = headerBytes
        if let header = readHeader(dataFD, size: size) {
            generation = header
            if let cursor, cursor.generation == generation { fileCursor = max(headerBytes, cursor.offset) }
            if fileCursor > size {
                // Everything was acknowledged and compaction 1 was cut short.
                guard ftruncate(dataFD, off_t(headerBytes)) == 0 else { throw .system(call: "ftruncate", errno: errno) }
                size = headerBytes
                fileCursor = headerBytes
            }
        } else {
            // Missing or garbled header: a new (or unusable) file starts empty.
            if size > 0 { truncations += 1 }
            generation = (cursor?.generation ?? 0) &+ 1
            guard ftruncate(dataFD, 0) == 0 else { throw .system(call: "ftruncate", errno: errno) }
            guard writeHeader(dataFD, generation: generation) else { throw .system(call: "pwrite", errno: errno) }
            size = headerBytes
        }
        var reader = JournalFrameReader(fd: dataFD, offset: fileCursor, end: size, chunkBytes: readChunkBytes, maxPayloadBytes: maxRecordBytes)
        var records: UInt64 = 0
        scanning: while true {
            switch reader.next(copy: false) {
            case .record: records += 1
            case .end, .declined: break scanning
            case .failed(let code): throw .system(call: "pread", errno: code)
            case .corrupt:
                guard ftruncate(dataFD, off_t(reader.offset)) == 0 else { throw .system(call: "ftruncate", errno: errno) }
                truncations += 1
                break scanning
            }
        }
        guard writeCursor(cursorFD, generation: generation, offset: fileCursor) else { throw .system(call: "pwrite", errno: errno) }
        var state = State(dataFD: dataFD, cursorFD: cursorFD, generation: generation, fileCursor: fileCursor, fileEnd: reader.offset)
        state.endIndex = records
        state.recoveredTruncations = truncations
        return state
    }

    /// `mkdir -p` with mode 0700 for what it creates.
    private static func makeDirectories(_ path: String) throws(OpenError) {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += (prefix.isEmpty || prefix.hasSuffix("/") ? "" : "/") + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST { throw .system(call: "mkdir \(prefix)", errno: errno) }
        }
    }

    // MARK: - File helpers

    private static func readHeader(_ fd: Int32, size: Int) -> UInt64? {
        guard size >= headerBytes else { return nil }
        var bytes = [UInt8](repeating: 0, count: headerBytes)
        guard preadFully(fd, &bytes, at: 0), Array(bytes[0..<4]) == dataMagic else { return nil }
        return loadUInt64(bytes, at: 8)
    }

    private static func writeHeader(_ fd: Int32, generation: UInt64) -> Bool {
        var bytes = dataMagic + [0, 0, 0, 0]
        appendUInt64(&bytes, generation)
        return bytes.withUnsafeBytes { pwriteFully(fd, $0, at: 0) }
    }

    private static func readCursor(_ fd: Int32) -> (generation: UInt64, offset: Int)? {
        var bytes = [UInt8](repeating: 0, count: cursorBytes)
        guard preadFully(fd, &bytes, at: 0), Array(bytes[0..<4]) == cursorMagic,
            loadUInt32(bytes, at: 4) == bytes[8...].withUnsafeBytes({ CRC32C.checksum($0) })
        else { return nil }
        let offset = loadUInt64(bytes, at: 16)
        guard offset <= UInt64(Int.max) else { return nil }
        return (loadUInt64(bytes, at: 8), Int(offset))
    }

    @discardableResult
    private static func writeCursor(_ fd: Int32, generation: UInt64, offset: Int) -> Bool {
        var body: [UInt8] = []
        appendUInt64(&body, generation)
        appendUInt64(&body, UInt64(offset))
        var bytes = cursorMagic
        appendUInt32(&bytes, CRC32C.checksum(body))
        bytes += body
        return bytes.withUnsafeBytes { pwriteFully(fd, $0, at: 0) }
    }

    /// Copies `range` of `source` to `target` at `offset`, through a buffer of
    /// ``copyChunkBytes``.
    private static func copy(from source: Int32, range: Range<Int>, to target: Int32, at offset: Int) -> Bool {
        var buffer = [UInt8](repeating: 0, count: min(copyChunkBytes, range.count))
        var done = 0
        while done < range.count {
            let count = min(buffer.count, range.count - done)
            buffer.removeLast(buffer.count - count)
            guard preadFully(source, &buffer, at: range.lowerBound + done),
                buffer.withUnsafeBytes({ pwriteFully(target, $0, at: offset + done) })
            else { return false }
            done += count
        }
        return true
    }

    /// Fills `bytes` from `offset`; false on error or end of file.
    private static func preadFully(_ fd: Int32, _ bytes: inout [UInt8], at offset: Int) -> Bool {
        let count = bytes.count
        var done = 0
        while done < count {
            let result = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, off_t(offset + done)) }
            if result < 0 && errno == EINTR { continue }
            guard result > 0 else { return false }
            done += result
        }
        return true
    }

    private static func pwriteFully(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int) -> Bool {
        var done = 0
        while done < bytes.count {
            let result = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done))
            if result < 0 && errno == EINTR { continue }
            guard result > 0 else { return false }
            done += result
        }
        return true
    }

    private static func appendUInt32(_ bytes: inout [UInt8], _ value: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    private static func appendUInt64(_ bytes: inout [UInt8], _ value: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    private static func loadUInt32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << (8 * UInt32($1)) }
    }

    private static func loadUInt64(_ bytes: [UInt8], at offset: Int) -> UInt64 {
        (0..<8).reduce(0) { $0 | UInt64(bytes[offset + $1]) << (8 * UInt64($1)) }
    }
}
