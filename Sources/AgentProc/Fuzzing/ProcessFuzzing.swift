import AgentCore
import AgentHTTP
import Hummingbird
import HummingbirdCore
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The process API's request decoding, for the fuzz targets (`Fuzz/`, `make fuzz`): what
/// `POST /start` makes of a body and `{id}` of a path segment, without starting anything.
/// It exists for the fuzz targets only.
public enum ProcessFuzzing {
    /// A start body's fields as the route reads them (400 as the route answers).
    public static func startRequest(
        json: [UInt8]
    ) throws(APIError) -> (
        command: String, workdir: String?, env: [String: String]?, background: Bool, options: StartOptions
    ) {
        let fields = try ProcessRoutes.startRequest(JSONRequest.parse(json, typeName: "StartProcessRequest"))
        return (fields.command, fields.workdir, fields.env, fields.background, fields.options)
    }

    /// Whether `GET /{id}/output?<query>` is accepted (as the route checks it before anything
    /// waits); a refusal is a 400, never a trap.
    public static func outputQueryAccepted(_ query: String) -> Bool {
        (try? OutputQuery(GoQuery(raw: query), maxWait: .seconds(300))) != nil
    }

    /// Matches `literal` against output written in `chunks`: the first `caughtUp` chunks
    /// are read back as an await's catch-up, the rest arrive live; the offset of the first
    /// matching line, if any.
    public static func literalMatchOffset(_ literal: [UInt8], chunks: [[UInt8]], caughtUp: Int) -> UInt64? {
        let watch = OutputWatch(condition: .literal(literal), from: 0, inline: true)
        var offset: UInt64 = 0
        for (index, chunk) in chunks.enumerated() {
            if index < caughtUp {
                watch.catchUp(chunk, at: offset)
            } else {
                if index == caughtUp { watch.endCatchUp() }
                chunk.withUnsafeBytes { watch.feed($0, at: offset) }
            }
            offset += UInt64(chunk.count)
        }
        if caughtUp >= chunks.count { watch.endCatchUp() }
        watch.outputEnded()
        return watch.match?.offset
    }

    /// What a restart makes of a state directory another agent left (or a disk corrupted).
    public struct RestoredState: Sendable {
        /// The spool's kept range, nil when it was refused as unusable.
        public var dropped: UInt64?
        public var end: UInt64?
        /// Bytes read back from the oldest kept one to the end, in reads of `readLimit`.
        public var readBack: [UInt8]
        /// What the head/tail answer rebuilt from the spool counts as written in all.
        public var headTailTotal: Int?
        /// Records found in `processes.jsonl`.
        public var records: Int
    }

    /// Builds a state directory in a new temporary directory from fuzzer bytes: a spool `f0`
    /// (a cursor, valid over `dropped`/`end` or `rawCursor` as it is, and segment files of
    /// the given names and bytes) and a `processes.jsonl`; restores it as the agent does at
    /// start, reads the spool back, and removes everything it made.
    public static func restore(
        dropped: UInt64, end: UInt64, rawCursor: [UInt8]?, segments: [(name: String, bytes: [UInt8])],
        processLog: [UInt8], segmentBytes: Int, readLimit: Int
    ) -> RestoredState {
        var template = Array("/tmp/agent-fuzz-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            return RestoredState(readBack: [], records: 0)
        }
        let base = String(cString: made)
        let spoolDir = base + "/spool"
        let dir = spoolDir + "/f0"
        mkdir(spoolDir, 0o700)
        mkdir(dir, 0o700)
        let cursor = rawCursor ?? SpoolCursor(dropped: dropped, end: end).encoded()
        try? AtomicFile.write(cursor, to: dir + "/cursor")
        for segment in segments
        where segment.name.utf8.allSatisfy({ $0 != UInt8(ascii: "/") && $0 != 0 }) && !segment.name.isEmpty
            && segment.name != "." && segment.name != ".." && segment.name != "cursor"
        {
            try? AtomicFile.write(segment.bytes, to: dir + "/" + segment.name)
        }
        try? AtomicFile.write(processLog, to: base + "/" + ProcessLog.fileName)
        var result = RestoredState(readBack: [], records: 0)
        do {
            var limits = OutputSpoolStore.Limits()
            limits.segmentBytes = max(1, segmentBytes)
            limits.maxBytesPerSpool = limits.segmentBytes * 4
            limits.maxTotalBytes = limits.segmentBytes * 8
            let store = try OutputSpoolStore(directory: spoolDir, limits: limits)
            if let spool = store.restore(id: "f0") {
                result.dropped = spool.dropped
                result.end = spool.end
                var offset = spool.dropped
                for _ in 0..<64 {
                    let read = spool.read(from: offset, limit: max(1, readLimit))
                    if read.bytes.isEmpty { break }
                    result.readBack += read.bytes
                    offset = read.next
                }
                result.headTailTotal = ManagedProcess.headTail(from: spool).totalWritten
            }
            // Each record becomes a restored process as at start (times from disk may be anything).
            let records = ProcessLog(directory: base, failures: DurableFailures(logger: Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() }))).restored
            for record in records {
                _ = ManagedProcess(restored: record, spool: nil, budget: SubscriberBudget(), nowUnix: 1_700_000_000)
            }
            result.records = records.count
            for id in store.storedIDs() { store.remove(id: id) }
        } catch {}
        // What the restore left (unknown files are never its to delete): removed here.
        for name in Posix.listDirectory(dir) { unlink(dir + "/" + name) }
        rmdir(dir)
        rmdir(spoolDir)
        for name in Posix.listDirectory(base) { unlink(base + "/" + name) }
        rmdir(base)
        return result
    }

    /// The `{id}` of a raw path segment, percent-decoded as the routes see it.
    public static func processID(_ raw: String) -> String {
        ProcessRoutes.processID(raw)
    }
}
