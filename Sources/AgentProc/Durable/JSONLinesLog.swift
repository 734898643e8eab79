import AgentCore
import CoreMetrics
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// An append-only file of JSON lines that its owner compacts by rewriting it whole (the
/// process records and the tool-call claims). An append is one `write` on an `O_APPEND`
/// descriptor; a failed or short one is cut off again (a torn line would swallow the next
/// one when read back) and the owner's next change rewrites the file from its state, so one
/// failure never silently ends the recording. A torn last line (a crash mid-write) is
/// skipped when read back. Nothing is synced: it survives the agent, not the machine.
///
/// Not thread-safe: its owner calls it under its own lock.
struct JSONLinesLog: ~Copyable {
    let path: String
    /// Largest file read back.
    let maxFileBytes: Int
    private var fd: Int32 = -1
    /// Lines in the file (compaction is due when they are many more than the live ones).
    private(set) var lines = 0

    init(path: String, maxFileBytes: Int) {
        self.path = path
        self.maxFileBytes = maxFileBytes
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    /// Every line of the file that decodes as `Line` (others, such as a torn last line, are skipped).
    func read<Line: Decodable>(_ type: Line.Type) -> [Line] {
        guard let bytes = AtomicFile.read(path, maxBytes: maxFileBytes) else { return [] }
        let decoder = JSONDecoder()
        return bytes.split(separator: UInt8(ascii: "\n")).compactMap { try? decoder.decode(Line.self, from: Data($0)) }
    }

    /// Whether the next change should rewrite the file: it could not be written, or it holds
    /// more than twice the live lines (and 1024 more).
    func needsRewrite(live: Int) -> Bool {
        fd < 0 || lines > 2 * live + 1024
    }

    /// Appends one line; false (the file is then rewritten at the next change) if it failed.
    @discardableResult
    mutating func append(_ line: some Encodable) -> Bool {
        guard fd >= 0, var bytes = try? CompactJSONEncoder().encode(line) else { return false }
        bytes.append(UInt8(ascii: "\n"))
        let before = lseek(fd, 0, SEEK_END)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count else {
            if before >= 0 { _ = ftruncate(fd, before) }
            close(fd)
            fd = -1
            ProcessMetrics.durableLogFailures.increment()
            return false
        }
        lines += 1
        return true
    }

    /// Replaces the file with `content` (atomically) and reopens it for appending.
    mutating func rewrite(_ content: [some Encodable]) {
        if fd >= 0 { close(fd) }
        fd = -1
        var out: [UInt8] = []
        let encoder = CompactJSONEncoder()
        for line in content {
            guard (try? encoder.encode(line, into: &out)) != nil else { continue }
            out.append(UInt8(ascii: "\n"))
        }
        do {
            try AtomicFile.write(out, to: path)
        } catch {
            ProcessMetrics.durableLogFailures.increment()
            return
        }
        lines = content.count
        fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW)
    }
}
