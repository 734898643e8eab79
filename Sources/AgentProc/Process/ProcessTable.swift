import CAgentSpawn

#if canImport(Glibc)
import Glibc
#endif

/// Reads of `/proc` for the reactor.
enum ProcessTable {
    /// (pid, process group) of every process.
    static func processGroups() -> [(pid_t, pid_t)] {
        var capacity = 4096
        while true {
            var pids = [pid_t](repeating: 0, count: capacity)
            var groups = [pid_t](repeating: 0, count: capacity)
            let n = Int(agent_scan_process_groups(&pids, &groups, Int32(capacity)))
            if n < 0 { return [] }
            if n <= capacity { return (0..<n).map { (pids[$0], groups[$0]) } }
            capacity *= 4
        }
    }

    /// This process's children.
    static func children() -> [pid_t] {
        var capacity = 1024
        while true {
            var pids = [pid_t](repeating: 0, count: capacity)
            let n = Int(agent_list_children(&pids, Int32(capacity)))
            if n < 0 { return [] }
            if n <= capacity { return Array(pids[0..<n]) }
            capacity *= 4
        }
    }
}
