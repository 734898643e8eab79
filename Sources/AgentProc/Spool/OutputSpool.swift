import AgentCore
import CAgentSpawn
import Synchronization
import Glibc

/// One process's output spool: a handle onto metadata held by its `OutputSpoolStore`.
///
/// The writer handle (from `create`) appends; any number of threads read. Bytes are
/// addressed by logical offset in the whole output; the spool keeps `[dropped, end)`.
/// The handle holds only immutable values (the store is `Sendable` and all mutable state
/// lives behind the store's `Mutex`), so it is `Sendable` without `@unchecked`.
public final class OutputSpool: Sendable {
    public let id: String
    let store: OutputSpoolStore
    let key: Int
    let isWriter: Bool
    private let _directory: String

    /// Largest read served at once (bounds memory per request).
    public static let maxReadBytes = 4 << 20
    /// A read whose segments were recycled/evicted meanwhile is retried at most this often.
    static let maxReadAttempts = 8

    init(store: OutputSpoolStore, key: Int, id: String, directory: String, isWriter: Bool) {
        self.store = store
        self.key = key
        self.id = id
        self._directory = directory
        self.isWriter = isWriter
    }

    deinit {
        if isWriter { finish() }
    }

    /// The spool's directory, so the caller can keep a small record file beside the segments.
    public var directory: String { _directory }

    /// Called by ONE writer thread; never blocks on readers (they take the store lock only
    /// for short metadata look-ups, never across I/O); never throws: a write error (ENOSPC,
    /// EIO) drops the rest of this chunk (counted) and keeps offsets consistent: everything
    /// before the failed bytes' end counts as dropped. Ignored on read-only, finished or
    /// removed spools. Cost per call: one `pwrite` per segment touched, one cursor `pwrite`,
    /// two uncontended lock round-trips per segment touched; once per segment a rename/open.
    public func append(_ bytes: UnsafeRawBufferPointer) {
        guard isWriter, let base = bytes.baseAddress, bytes.count > 0 else { return }
        var done = 0
        var cursorUpdate: (cursorFD: Int32, cursor: SpoolCursor)? = nil
        while done < bytes.count {
            let prepared = store.state.withLock { $0.prepareWrite(key) }
            switch prepared {
            case .ignore:
                return
            case .failed(let code):
                let rest = bytes.count - done
                let error = SystemCallError(call: "open segment in \(directory)", errno: code)
                cursorUpdate = store.state.withLock { $0.commitFailure(key, rest, error) }
                done = bytes.count
            case .write(let fd, let position, let room):
                let n = min(room, bytes.count - done)
                if Posix.pwriteAll(fd, base + done, n, position) {
                    cursorUpdate = store.state.withLock { $0.commitWrite(key, n) }
                    done += n
                } else {
                    let error = SystemCallError(call: "pwrite segment in \(directory)", errno: errno)
                    let rest = bytes.count - done
                    cursorUpdate = store.state.withLock { $0.commitFailure(key, rest, error) }
                    done = bytes.count
                }
            }
        }
        writeCursor(cursorUpdate)
    }

    /// Written after the data, so a SIGKILL leaves a cursor that never claims unwritten bytes.
    private func writeCursor(_ update: (cursorFD: Int32, cursor: SpoolCursor)?) {
        guard let (fd, cursor) = update, fd >= 0, !cursor.write(to: fd) else { return }
        let error = SystemCallError(call: "pwrite \(directory)/cursor", errno: errno)
        store.state.withLock { $0.countWriteError(error) }
    }

    /// Moves up to `count` bytes waiting in `pipe` (a non-blocking pipe's read end) into the
    /// spool through `staging` (see ``SpliceStaging``): the kernel copies them into the page
    /// cache without a pass through user space (the process reactor's path for output nobody
    /// reads live). Stops early when the pipe has less. Bytes taken from the pipe that could
    /// not be written (ENOSPC, EIO) are dropped and counted like a failed ``append(_:)``.
    /// Returns the bytes taken from the pipe.
    func appendSplicing(from pipe: Int32, count: Int, through staging: SpliceStaging) -> Int {
        guard isWriter, count > 0 else { return 0 }
        var done = 0
        var cursorUpdate: (cursorFD: Int32, cursor: SpoolCursor)? = nil
        splicing: while done < count {
            let prepared = store.state.withLock { $0.prepareWrite(key) }
            guard case .write(let fd, let position, let room) = prepared else { break splicing }
            let want = min(room, count - done)
            var unwritten = 0
            let n = agent_pipe_splice_staged(pipe, staging.readEnd, staging.writeEnd, staging.nullfd, fd, Int64(position), want, &unwritten)
            guard n > 0 else { break splicing }
            if n > unwritten { cursorUpdate = store.state.withLock { $0.commitWrite(key, n - unwritten) } }
            done += n
            if unwritten > 0 {
                // The staged bytes the file refused (the splice's own errno).
                let error = SystemCallError(call: "splice to segment in \(directory)", errno: errno == 0 ? EIO : errno)
                cursorUpdate = store.state.withLock { $0.commitFailure(key, unwritten, error) }
                break splicing
            }
            if n < want { break splicing }
        }
        writeCursor(cursorUpdate)
        return done
    }

    /// Convenience for tests and callers holding arrays.
    public func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Reads up to `limit` (capped at `maxReadBytes`) bytes from logical `offset`; safe on
    /// any thread, concurrently with `append` and evictions. Segment files are opened per
    /// read; after `pread`, the segments are re-checked under the lock (seqlock style) and the
    /// read is retried from the new `dropped` if one was evicted/recycled meanwhile.
    public func read(from offset: UInt64, limit: Int) -> SpoolRead {
        let limit = min(max(limit, 0), Self.maxReadBytes)
        var from = offset
        var last = (dropped: UInt64(0), end: UInt64(0))
        for _ in 0..<Self.maxReadAttempts {
            guard let plan = store.state.withLock({ $0.planRead(key, from: from, limit: limit) }) else { break }
            last = (plan.dropped, plan.end)
            if plan.pieces.isEmpty {
                return SpoolRead(bytes: [], offset: plan.offset, next: plan.offset, dropped: plan.dropped, end: plan.end)
            }
            let count = plan.pieces.reduce(0) { $0 + $1.count }
            var ok = true
            let bytes = [UInt8](unsafeUninitializedCapacity: count) { buf, initialized in
                var at = 0
                for p in plan.pieces {
                    let fd = Posix.openRead(p.path)
                    guard fd >= 0 else { ok = false; break }
                    let got = Posix.preadAll(fd, buf.baseAddress! + at, p.count, p.fileOffset)
                    close(fd)
                    guard got else { ok = false; break }
                    at += p.count
                }
                if !ok { buf.baseAddress!.initialize(repeating: 0, count: count) }
                initialized = count
            }
            guard let check = store.state.withLock({ $0.validate(key, plan.pieces) }) else { break }
            if ok && check.ok {
                return SpoolRead(
                    bytes: bytes, offset: plan.offset, next: plan.offset + UInt64(count),
                    dropped: plan.dropped, end: plan.end)
            }
            last = (check.dropped, check.end)
            from = max(from, check.dropped)
        }
        let at = min(max(offset, last.dropped), last.end)
        return SpoolRead(bytes: [], offset: at, next: at, dropped: last.dropped, end: last.end)
    }

    /// Total bytes of output ever appended (logical end).
    public var end: UInt64 { store.state.withLock { $0.spools[key]?.end ?? 0 } }

    /// Logical offset of the oldest kept byte (= number of bytes dropped before it).
    public var dropped: UInt64 { store.state.withLock { $0.spools[key]?.dropped ?? 0 } }

    /// No more appends: trims the current segment, persists the cursor, closes descriptors.
    /// Idempotent; must not run concurrently with `append` (call it from the writer thread).
    /// Runs automatically when the writer handle is deinitialized.
    public func finish() {
        guard isWriter else { return }
        store.state.withLock { $0.finish(key) }
    }
}
