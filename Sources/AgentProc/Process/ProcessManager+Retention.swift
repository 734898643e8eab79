import AgentCore
import AgentHTTP
import CoreMetrics
import FoundationEssentials
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Which processes are kept: exits, forgetting, reaping, and looking them up.
extension ProcessManager {
    /// Called on the reactor thread when a process exits: queue it and keep at most
    /// `maxRetainedExited` exited processes (the oldest exits go first).
    func noteExited(_ process: ManagedProcess) {
        ProcessMetrics.exited.increment()
        if let exit = process.exitInfo {
            let recorded = ProcessRecord.Exit(code: exit.status.code, signal: exit.status.signal, exitedAtUnix: exit.exitedAtUnix)
            if spooling { processLog.exited(process.id, recorded) }
            toolCalls.recordExit(id: process.id, recorded)
        }
        if let chat = process.chatID, let paths = configuration.chatPaths {
            // The directory it ran in; "" is the agent's own, a relative one is relative to it.
            // For the chat and every ancestor, as the reference and the file API record paths.
            let workdir = process.workdir
            let absolute = workdir.hasPrefix("/") ? workdir : FileManager.default.currentDirectoryPath + (workdir.isEmpty ? "" : "/" + workdir)
            for id in [chat] + process.ancestorChatIDs { paths.record(absolute, chat: id) }
        }
        state.withLock { s in
            guard s.processes[process.id] === process else { return }
            s.exitedOrder.append(process.id)
            ProcessMetrics.running.record(s.runningCount)
            while s.exitedCount > configuration.maxRetainedExited, let oldest = s.popOldestExited() {
                if let victim = s.processes[oldest] { forget(victim, in: &s) }
            }
        }
    }

    private func forget(_ process: ManagedProcess, in s: inout State) {
        s.processes[process.id] = nil
        if process.isOutputOpen, let token = process.reactorToken { watcher.closeOutput(token) }
        // The files go off this lock.
        if process.retireSpool() != nil { remover.remove(process.id) }
        // A restored process (pid 0) has a record even when this run spools nothing.
        if spooling || process.pid == 0 { processLog.forgot(process.id) }
    }

    // MARK: Query

    /// The process, unless unknown or owned by another chat (both look like 404).
    public func lookup(_ id: String, chat: ChatIdentity?) -> ManagedProcess? {
        guard let process = state.withLock({ $0.processes[id] }) else { return nil }
        return Self.visible(process, to: chat) ? process : nil
    }

    /// True when the id exists but belongs to another chat.
    public func isForeign(_ id: String, chat: ChatIdentity?) -> Bool {
        guard let process = state.withLock({ $0.processes[id] }) else { return false }
        return !Self.visible(process, to: chat)
    }

    /// A process with no chat is visible to all; a request with no chat sees everything.
    static func visible(_ process: ManagedProcess, to chat: ChatIdentity?) -> Bool {
        guard let owner = process.chatID, let chat else { return true }
        return owner == chat.id
    }

    /// Reap, filter by chat (exact match; chat-less processes hidden from chats), sort
    /// (running first, newest first), cap (at most `listLimit`).
    public func list(chat: ChatIdentity?) -> [ManagedProcess] {
        reap()
        let all = state.withLock { Array($0.processes.values) }
        let mine = all.filter { chat == nil || $0.chatID == chat?.id }
        let sorted = mine.map { ($0, $0.isRunning) }.sorted { a, b in
            if a.1 != b.1 { return a.1 }
            if a.0.startedAtUnix != b.0.startedAtUnix { return a.0.startedAtUnix > b.0.startedAtUnix }
            return a.0.startedAt > b.0.startedAt
        }
        return sorted.prefix(configuration.listLimit).map(\.0)
    }

    /// Deletes processes that exited more than `reapAfter` ago; returns how many.
    @discardableResult
    public func reap(now: ContinuousClock.Instant = .now) -> Int {
        state.withLock { s in
            var reaped = 0
            while s.exitedHead < s.exitedOrder.count {
                let id = s.exitedOrder[s.exitedHead]
                guard let process = s.processes[id], let exit = process.exitInfo else {
                    _ = s.popOldestExited()
                    continue
                }
                guard now - exit.exitedAt > configuration.reapAfter else { break }
                _ = s.popOldestExited()
                forget(process, in: &s)
                reaped += 1
            }
            return reaped
        }
    }

    /// True once shutdown has begun (streams then give stalled clients less time).
    public var isShuttingDown: Bool { state.withLock { $0.closed } }

    /// Number of processes retained (running and exited).
    public var count: Int { state.withLock { $0.processes.count } }
}
