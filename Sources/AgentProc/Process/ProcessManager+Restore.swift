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

/// Taking up what an earlier agent left in the state directory.
extension ProcessManager {
    /// Takes up the processes an earlier agent left (their records and spools): exited ones
    /// as they ended, running ones as `lost`; the newest ``Configuration/maxRetainedExited``
    /// are kept, the rest (and anything unreadable) removed.
    func restore() {
        let nowUnix = Int64(Date().timeIntervalSince1970)
        let records = Dictionary(processLog.restored.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
        if let spools {
            // What cannot be a spool (links, files, stray directories) goes first, then the
            // spools without a record (of processes forgotten, or never recorded).
            let strays = spools.removeStrays()
            if !strays.removed.isEmpty || !strays.left.isEmpty {
                logger.info(
                    "stray entries in the spool directory",
                    metadata: [
                        "removed": "\(strays.removed.count)", "left": "\(strays.left)",
                    ])
            }
            for id in spools.storedIDs() where records[id] == nil { spools.remove(id: id) }
        }
        var restored: [ManagedProcess] = []
        for record in records.values {
            // A process that printed nothing has no spool.
            let spool = spools?.restore(id: record.id)
            restored.append(ManagedProcess(restored: record, spool: spool, budget: subscriberBudget, nowUnix: nowUnix))
        }
        restored.sort { ($0.exitInfo?.exitedAtUnix ?? 0, $0.startedAtUnix) < ($1.exitInfo?.exitedAtUnix ?? 0, $1.startedAtUnix) }
        let excess = max(0, restored.count - configuration.maxRetainedExited)
        for process in restored.prefix(excess) {
            spools?.remove(id: process.id)
            processLog.forgot(process.id)
        }
        let kept = restored.dropFirst(excess)
        state.withLock { s in
            for process in kept {
                s.processes[process.id] = process
                s.exitedOrder.append(process.id)
            }
        }
        if !kept.isEmpty {
            ProcessMetrics.restored.increment(by: kept.count)
            logger.info(
                "restored processes of an earlier agent",
                metadata: [
                    "count": "\(kept.count)", "lost": "\(kept.filter(\.lost).count)",
                ])
        }
    }
}
