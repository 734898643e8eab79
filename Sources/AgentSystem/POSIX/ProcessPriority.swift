import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// oom_score_adj and nice for children (Linux), applied between fork and exec: the process
/// API's and the manifest's scripts' (`--proc-prio-mgmt`).
///
/// Defaults follow the reference's `agent-exec`: oom_score_adj 998 (0 if the agent's own is
/// negative, 1000 if it is already >= 998), so the kernel kills a runaway child before the
/// agent; nice = the agent's + 5 (at most 19). `CODER_PROC_OOM_SCORE` and
/// `CODER_PROC_NICE_SCORE` override them.
public struct ProcessPriority: Sendable, Equatable {
    public var oomScoreAdj: Int32?
    public var nice: Int32?

    public init(oomScoreAdj: Int32?, nice: Int32?) {
        self.oomScoreAdj = oomScoreAdj
        self.nice = nice
    }

    /// No adjustment at all.
    public static let unchanged = ProcessPriority(oomScoreAdj: nil, nice: nil)

    /// The defaults for this agent process, with environment overrides applied.
    public static func defaults(environment: [String: String]) -> ProcessPriority {
        var oom: Int32 = 998
        if let own = readOwnOOMScoreAdj() {
            if own < 0 { oom = 0 } else if own >= 998 { oom = 1000 }
        }
        if let override = environment["CODER_PROC_OOM_SCORE"].flatMap({ Int32($0) }) { oom = max(-1000, min(1000, override)) }
        errno = 0
        let ownNice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
        var nice = min(19, (errno == 0 ? ownNice : 0) + 5)
        if let override = environment["CODER_PROC_NICE_SCORE"].flatMap({ Int32($0) }) { nice = max(-20, min(19, override)) }
        return ProcessPriority(oomScoreAdj: oom, nice: nice)
    }

    static func readOwnOOMScoreAdj() -> Int32? {
        guard let text = try? String(contentsOfFile: "/proc/self/oom_score_adj", encoding: .utf8) else { return nil }
        return Int32(text.trimmingWhitespace())
    }
}
