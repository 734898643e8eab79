import AgentCore
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Which tool calls started which process, kept on disk so that a retried start (the same
/// `Coder-Chat-Id` and `Coder-Tool-Call-*` headers) never runs its command twice, even
/// across an agent restart (coder/coder #29605: a retried call re-ran a 31-minute command).
///
/// A claim is written **before** the spawn (and withdrawn if the spawn fails), so a crash
/// between the two leaves a claim whose process is unknown: it is reported `lost`, never
/// run again. A claim that cannot be written whole and synced (`fdatasync`: a disk that
/// reports ENOSPC or EIO only at write-back is caught too) refuses the start: nothing runs
/// (``Claim/notRecorded(_:)``). The file is an append-only log of JSON lines
/// (`tool-calls.jsonl`), compacted when it holds twice what is live (a compaction is synced,
/// its directory too); a torn last line is skipped when read back.
///
/// Bounds: at most ``maxEntries`` calls, none older than ``maxAge`` (the oldest go first).
/// A call older than what the ledger still covers (its horizon: when it was created,
/// or the newest entry it forgot) that it has no entry for may have run: it is refused.
final class ToolCallStarts: Sendable {
    static let maxEntries = 4096
    static let maxAge: Duration = .seconds(24 * 3600)
    static let fileName = "tool-calls.jsonl"
    /// Largest log read back (4096 live entries of at most ~1 KiB, and as many dead lines).
    static let maxFileBytes = 16 << 20

    struct Entry: Sendable, Equatable {
        var key: ToolCallKey
        var digest: String
        var id: String
        var atUnixMs: Int64
        var exit: ProcessRecord.Exit?
        /// The spawn is under way.
        var pending = false
    }

    /// What a start with tool-call headers should do.
    enum Claim: Sendable {
        /// Run it under `id` (then ``settle(_:started:)``).
        case run(id: String)
        /// It ran (or runs) as `entry.id`: answer with that process.
        case existing(Entry)
        /// The same call with a different request.
        case mismatch
        /// No entry, but the call is older than what the ledger covers: it may have run.
        case beforeHorizon
        /// The claim could not be written durably: the call must not run now.
        case notRecorded(SystemCallError)
    }

    private struct Line: Codable {
        var t: String
        var chat: String?
        var message: UInt64?
        var call: String?
        var digest: String?
        var id: String?
        var at: Int64?
        var code: Int?
        var signal: String?
        var exited: Int64?
    }

    private struct State: ~Copyable {
        var entries: [ToolCallKey: Entry] = [:]
        var keyByID: [String: ToolCallKey] = [:]
        var horizonUnixMs: Int64
        var log: JSONLinesLog
        var waiters: [ToolCallKey: [CheckedContinuation<Void, Never>]] = [:]
    }

    private let state: Mutex<State>
    private let failures: DurableFailures

    /// Opens (or starts) the log in `directory`.
    init(directory: String, failures: DurableFailures, nowUnixMs: Int64 = ToolCallStarts.nowUnixMs()) {
        self.failures = failures
        var s = State(horizonUnixMs: nowUnixMs, log: JSONLinesLog(path: directory + "/" + Self.fileName, maxFileBytes: Self.maxFileBytes))
        Self.load(s.log.read(Line.self), into: &s)
        Self.evict(&s, nowUnixMs: nowUnixMs)
        // A horizon from disk past now (any number may be there) would refuse every call
        // from now on, and be saved again with each rewrite.
        s.horizonUnixMs = min(s.horizonUnixMs, nowUnixMs)
        do {
            try Self.rewrite(&s)
        } catch {
            failures.report(.toolCalls, error)
        }
        state = Mutex(s)
    }

    static func nowUnixMs() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// One pass of a claim: decided (its line written and synced), or wait for the start of
    /// the same call that is spawning.
    enum ClaimStep: Sendable {
        case decided(Claim)
        case wait
    }

    /// Claims `key` for a start whose request hashes to `digest`; waits while another start
    /// of the same call is spawning. Each pass writes (and syncs) the log, so it runs
    /// through `offLoop` (a thread where blocking on the disk is allowed).
    func claim(
        _ key: ToolCallKey, digest: String, ageMs: UInt64, newID: String,
        offLoop: (@escaping @Sendable () -> ClaimStep) async -> ClaimStep
    ) async -> Claim {
        let now = Self.nowUnixMs()
        while true {
            switch await offLoop({ self.claimPass(key, digest: digest, ageMs: ageMs, newID: newID, now: now) }) {
            case .decided(let claim): return claim
            case .wait:
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let stillPending = state.withLock { s -> Bool in
                        guard s.entries[key]?.pending == true else { return false }
                        s.waiters[key, default: []].append(continuation)
                        return true
                    }
                    if !stillPending { continuation.resume() }
                }
            }
        }
    }

    /// Decides a claim and, for a new one, writes its line and syncs it (blocking).
    private func claimPass(_ key: ToolCallKey, digest: String, ageMs: UInt64, newID: String, now: Int64) -> ClaimStep {
        enum Step { case decided(Claim), wait, sync(fd: Int32, errno: Int32) }
        let step = state.withLock { s -> Step in
            if let entry = s.entries[key] {
                if entry.pending { return .wait }
                return .decided(entry.digest == digest ? .existing(entry) : .mismatch)
            }
            let madeAt = now - Int64(clamping: ageMs)
            if madeAt < s.horizonUnixMs { return .decided(.beforeHorizon) }
            var entry = Entry(key: key, digest: digest, id: newID, atUnixMs: now)
            entry.pending = true
            s.entries[key] = entry
            s.keyByID[newID] = key
            let line = Line(t: "start", chat: key.chat, message: key.messageID, call: key.callID, digest: digest, id: newID, at: now)
            do throws(SystemCallError) {
                let synced = try Self.write(&s, line)
                Self.evict(&s, nowUnixMs: now)
                // An appended line is synced off the lock (a slow disk must not hold up
                // the exits the reactor records).
                if synced { return .decided(.run(id: newID)) }
                let fd = s.log.syncDescriptor()
                return .sync(fd: fd, errno: fd < 0 ? errno : 0)
            } catch {
                s.entries[key] = nil
                s.keyByID[newID] = nil
                return .decided(.notRecorded(error))
            }
        }
        switch step {
        case .sync(let fd, let code):
            let failure: SystemCallError?
            if fd < 0 {
                failure = SystemCallError(call: "dup", errno: code)
            } else {
                failure = fdatasync(fd) == 0 ? nil : SystemCallError(call: "fdatasync", errno: errno)
                close(fd)
            }
            guard let failure else { return .decided(.run(id: newID)) }
            withdraw(key, id: newID)
            failures.report(.toolCalls, failure)
            return .decided(.notRecorded(failure))
        case .decided(.notRecorded(let error)):
            failures.report(.toolCalls, error)
            return .decided(.notRecorded(error))
        case .decided(let claim): return .decided(claim)
        case .wait: return .wait
        }
    }

    /// A claim whose line was written but not synced is dropped, and the file rewritten at
    /// the next change without it (until then, an agent restart finds the call `lost`: it
    /// is not run again, so nothing runs twice). Its waiters try again.
    private func withdraw(_ key: ToolCallKey, id: String) {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            if s.entries[key]?.id == id {
                s.entries[key] = nil
                s.keyByID[id] = nil
            }
            s.log.markBroken()
            return s.waiters.removeValue(forKey: key) ?? []
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The spawn of a claimed call ended: kept if it started, withdrawn if not (a retry may
    /// then run it).
    func settle(_ key: ToolCallKey, started: Bool) {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            if started {
                s.entries[key]?.pending = false
            } else if let entry = s.entries.removeValue(forKey: key) {
                s.keyByID[entry.id] = nil
                append(&s, Line(t: "failed", id: entry.id))
            }
            return s.waiters.removeValue(forKey: key) ?? []
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Records how a claimed call's process ended (it outlives the process's own record). On
    /// the reactor thread: an append at most, never the synced rewrite (a compaction, or the
    /// rewrite a log broken by a failed write needs, waits for the next claim, off the
    /// reactor; the state holds the exit meanwhile, and any rewrite writes it).
    func recordExit(id: String, _ exit: ProcessRecord.Exit) {
        state.withLock { s in
            guard let key = s.keyByID[id] else { return }
            s.entries[key]?.exit = exit
            guard s.log.isOpen else { return }
            do throws(SystemCallError) {
                try s.log.append(Line(t: "exit", id: id, code: exit.code, signal: exit.signal, exited: exit.exitedAtUnix))
            } catch {
                failures.report(.toolCalls, error)
            }
        }
    }

    // MARK: Log

    private static func load(_ lines: [Line], into s: inout State) {
        for line in lines {
            switch line.t {
            case "horizon":
                if let at = line.at { s.horizonUnixMs = at }
            case "start":
                guard let chat = line.chat, let message = line.message, let call = line.call, let digest = line.digest,
                    let id = line.id, let at = line.at
                else { continue }
                let key = ToolCallKey(chat: chat, messageID: message, callID: call)
                if let old = s.entries[key] { s.keyByID[old.id] = nil }
                s.entries[key] = Entry(key: key, digest: digest, id: id, atUnixMs: at)
                s.keyByID[id] = key
            case "failed":
                if let id = line.id, let key = s.keyByID.removeValue(forKey: id) { s.entries[key] = nil }
            case "exit":
                if let id = line.id, let key = s.keyByID[id], let code = line.code, let exited = line.exited {
                    s.entries[key]?.exit = ProcessRecord.Exit(code: code, signal: line.signal, exitedAtUnix: exited)
                }
            default:
                continue
            }
        }
    }

    /// Drops entries beyond the bounds (oldest first, never one being spawned) and moves the
    /// horizon past them.
    private static func evict(_ s: inout State, nowUnixMs: Int64) {
        let oldestKept = nowUnixMs - Int64(maxAge / .milliseconds(1))
        let stale = s.entries.values.filter { !$0.pending && $0.atUnixMs < oldestKept }
        var victims = stale
        let over = s.entries.count - stale.count - maxEntries
        if over > 0 {
            let rest = s.entries.values.filter { !$0.pending && $0.atUnixMs >= oldestKept }.sorted { $0.atUnixMs < $1.atUnixMs }
            victims += rest.prefix(over)
        }
        for victim in victims {
            s.entries[victim.key] = nil
            s.keyByID[victim.id] = nil
            // (A time read from disk may be anything: no overflow past the largest.)
            s.horizonUnixMs = max(s.horizonUnixMs, victim.atUnixMs == .max ? .max : victim.atUnixMs + 1)
        }
    }

    /// Appends one line; its effect is in the state already (a rewrite writes the state).
    /// A failure is reported; the next change rewrites the file.
    private func append(_ s: inout State, _ line: Line) {
        do {
            _ = try Self.write(&s, line)
        } catch {
            failures.report(.toolCalls, error)
        }
    }

    /// Appends `line`, or rewrites the file when due; true if the file was rewritten (a
    /// rewrite is synced), false if the line was appended (not synced: the caller syncs
    /// what must be).
    private static func write(_ s: inout State, _ line: Line) throws(SystemCallError) -> Bool {
        if s.log.needsRewrite(live: s.entries.count) {
            try rewrite(&s)
            return true
        }
        try s.log.append(line)
        return false
    }

    /// Rewrites the log as it stands: the horizon, then each entry (and its exit). Synced
    /// (file and directory), so a compaction never loses a synced claim to a machine crash.
    private static func rewrite(_ s: inout State) throws(SystemCallError) {
        var lines = [Line(t: "horizon", at: s.horizonUnixMs)]
        for entry in s.entries.values.sorted(by: { $0.atUnixMs < $1.atUnixMs }) {
            lines.append(
                Line(
                    t: "start", chat: entry.key.chat, message: entry.key.messageID, call: entry.key.callID,
                    digest: entry.digest, id: entry.id, at: entry.atUnixMs))
            if let exit = entry.exit {
                lines.append(Line(t: "exit", id: entry.id, code: exit.code, signal: exit.signal, exited: exit.exitedAtUnix))
            }
        }
        try s.log.rewrite(lines, sync: true)
    }
}
