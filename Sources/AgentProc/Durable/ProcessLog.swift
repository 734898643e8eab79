import AgentCore
import Synchronization

/// The records of the processes the manager knows, on disk (`processes.jsonl`), so that an
/// agent restart finds them again: a line when a process starts, one when it exits, one
/// when it is forgotten (reaped or evicted). Each is one `write` on the start and exit paths
/// (no file made per process: a command that prints nothing costs the disk two short lines).
/// A record still without an exit after a restart is a process whose end the agent could not
/// see (`lost`).
///
/// Nothing is synced (a record serves an agent restart; after a machine's, no process runs
/// on). A record that cannot be written (a full disk) does not stop its process: the
/// failure is reported (``DurableFailures``: counted, logged, shown by `GET /status`), the
/// start's answer carries a warning, and the file is rewritten whole at the next change.
///
/// Bounds: the live records are the processes the manager keeps (1024 running and 256
/// exited at most); a record keeps at most ``maxCommandBytes`` of its command; the file is
/// rewritten from the live records once it holds twice as many lines (and 1024 more).
final class ProcessLog: Sendable {
    static let fileName = "processes.jsonl"
    /// Of a command, what its record keeps (the rest is cut; the process runs it whole).
    static let maxCommandBytes = 16 * 1024
    /// Largest log read back: 1280 live records of at most ~17 KiB, and the dead lines the
    /// compaction allows.
    static let maxFileBytes = 96 << 20

    private struct Line: Codable {
        var t: String
        var record: ProcessRecord?
        var id: String?
        var exit: ProcessRecord.Exit?
    }

    private struct State: ~Copyable {
        var live: [String: ProcessRecord] = [:]
        var log: JSONLinesLog
    }

    private let state: Mutex<State>
    private let failures: DurableFailures
    /// The records found at start (oldest start first).
    let restored: [ProcessRecord]

    /// Reads the records an earlier agent left, keeping the `keeping` newest (as the manager
    /// keeps its exited processes: the latest exits, lost ones first to go): a file of up to
    /// 96 MiB may hold hundreds of thousands of records, or commands longer than a record
    /// keeps, which are cut.
    init(directory: String, failures: DurableFailures, keeping: Int = 256) {
        self.failures = failures
        var s = State(log: JSONLinesLog(path: directory + "/" + Self.fileName, maxFileBytes: Self.maxFileBytes))
        for line in s.log.read(Line.self) {
            switch line.t {
            case "start":
                if var record = line.record, record.version == 1 {
                    record.command = Self.cut(record.command)
                    s.live[record.id] = record
                }
            case "exit": if let id = line.id, let exit = line.exit { s.live[id]?.exit = exit }
            case "forget": if let id = line.id { s.live[id] = nil }
            default: continue
            }
        }
        if s.live.count > keeping {
            let newest = s.live.values.sorted { ($0.exit?.exitedAtUnix ?? 0, $0.startedAtUnix) > ($1.exit?.exitedAtUnix ?? 0, $1.startedAtUnix) }
            s.live = Dictionary(uniqueKeysWithValues: newest.prefix(max(0, keeping)).map { ($0.id, $0) })
        }
        restored = s.live.values.sorted { ($0.startedAtUnix, $0.id) < ($1.startedAtUnix, $1.id) }
        do {
            try Self.rewrite(&s)
        } catch {
            failures.report(.processRecords, error)
        }
        state = Mutex(s)
    }

    /// Records a start; the error (already reported) if the record could not be written.
    @discardableResult
    func started(_ record: ProcessRecord) -> SystemCallError? {
        var record = record
        record.command = Self.cut(record.command)
        let kept = record
        return change(Line(t: "start", record: kept)) { $0[kept.id] = kept }
    }

    /// An exit (on the reactor thread): appended at most, never a rewrite (see `change`).
    func exited(_ id: String, _ exit: ProcessRecord.Exit) {
        change(Line(t: "exit", id: id, exit: exit), appendOnly: true) { $0[id]?.exit = exit }
    }

    /// A process forgotten (on the reactor thread, as retention follows an exit): appended at
    /// most, never a rewrite.
    func forgot(_ id: String) {
        change(Line(t: "forget", id: id), appendOnly: true) { $0[id] = nil }
    }

    /// Applies a change and writes its line. `appendOnly` (the reactor's changes): never the
    /// whole file, which a compaction or a log broken by a failed write (a full disk) would
    /// rewrite on every change, holding every process's output and exits meanwhile; a
    /// compaction waits for the next start, and a broken log skips the line (the state holds
    /// it, and the next start's rewrite writes it). The log grows meanwhile by at most two
    /// lines per process started.
    @discardableResult
    private func change(_ line: Line, appendOnly: Bool = false, _ apply: (inout [String: ProcessRecord]) -> Void) -> SystemCallError? {
        let failure = state.withLock { s -> SystemCallError? in
            apply(&s.live)
            do throws(SystemCallError) {
                if appendOnly {
                    if s.log.isOpen { try s.log.append(line) }
                } else if s.log.needsRewrite(live: s.live.count) {
                    try Self.rewrite(&s)
                } else {
                    try s.log.append(line)
                }
                return nil
            } catch {
                return error
            }
        }
        if let failure { failures.report(.processRecords, failure) }
        return failure
    }

    /// At most ``maxCommandBytes`` of a command.
    private static func cut(_ command: String) -> String {
        command.utf8.count > maxCommandBytes ? String(decoding: command.utf8.prefix(maxCommandBytes), as: UTF8.self) : command
    }

    private static func rewrite(_ s: inout State) throws(SystemCallError) {
        try s.log.rewrite(s.live.values.sorted { $0.startedAtUnix < $1.startedAtUnix }.map { Line(t: "start", record: $0) })
    }
}
