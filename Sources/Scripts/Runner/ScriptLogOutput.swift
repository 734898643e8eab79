import AgentCore
import CoreMetrics
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A run's output: every byte to the script's log file, and each line (stdout as INFO,
/// stderr as ERROR, sanitised) to the upload journal under the script's log source.
///
/// Used from the run's thread only; the lock is never contended (it makes the type
/// Sendable). Memory: a partial line per stream (``LogLineSplitter``'s bound).
final class ScriptLogOutput: ScriptOutputHandler {
    private struct Streams {
        var stdout = LogLineSplitter()
        var stderr = LogLineSplitter()
        var fileFailed = false
    }
    private let streams = Mutex(Streams())
    private let file: Int32
    private let sourceID: [UInt8]
    private let uploads: ScriptUploads
    private let metrics: ScriptsMetrics

    /// Takes ownership of `file` (closed when the run has finished; -1 for none).
    init(file: Int32, sourceID: [UInt8], uploads: ScriptUploads, metrics: ScriptsMetrics) {
        self.file = file
        self.sourceID = sourceID
        self.uploads = uploads
        self.metrics = metrics
    }

    func output(_ chunk: UnsafeRawBufferPointer, from stream: ScriptStream) {
        metrics.outputBytes.increment(by: chunk.count)
        let now = ScriptUploads.nanoseconds(Date())
        let level = stream == .stdout ? LogRecord.levelInfo : LogRecord.levelError
        var records: [[UInt8]] = []
        streams.withLock { s in
            if file >= 0, !s.fileFailed { s.fileFailed = !Self.writeAll(file, chunk) }
            let emit = { (line: LogLineSplitter.Line) in
                records.append(LogRecord.encode(sourceID: self.sourceID, level: level, createdAt: now, sanitizing: line.bytes))
            }
            if stream == .stdout { s.stdout.feed(chunk, into: emit) } else { s.stderr.feed(chunk, into: emit) }
        }
        uploads.appendLogs(records)
    }

    func finished() {
        let now = ScriptUploads.nanoseconds(Date())
        var records: [[UInt8]] = []
        streams.withLock { s in
            s.stdout.finish { records.append(LogRecord.encode(sourceID: sourceID, level: LogRecord.levelInfo, createdAt: now, sanitizing: $0.bytes)) }
            s.stderr.finish { records.append(LogRecord.encode(sourceID: sourceID, level: LogRecord.levelError, createdAt: now, sanitizing: $0.bytes)) }
        }
        uploads.appendLogs(records)
        if file >= 0 { close(file) }
    }

    private static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += n
        }
        return true
    }
}
