/// How many journal records go into one `BatchCreateLogs` request: one log source per
/// request, and the reference's budget of Σ(len(output) + 21) ≤ 1 MiB (21 bytes standing
/// for each log's fixed fields on the wire).
enum LogBatching {
    static let budgetBytes = 1 << 20
    static let overheadPerLog = 21

    /// The length of the longest prefix of `records` that shares the first record's source
    /// and whose costs sum to at most `budget`; at least 1 when `records` is not empty (a
    /// single line over the budget still goes, alone), 0 when it is.
    static func sameSourcePrefix(_ records: some Collection<LogRecord>, budget: Int = budgetBytes) -> Int {
        guard let first = records.first else { return 0 }
        var total = 0
        var count = 0
        for record in records {
            guard record.sourceID == first.sourceID else { break }
            total += record.batchCost
            if count > 0 && total > budget { break }
            count += 1
        }
        return count
    }
}
