/// How many journal records go into one `BatchCreateLogs` request: one log source per
/// request, and the reference's budget of Σ(len(output) + 21) ≤ 1 MiB (21 bytes standing
/// for each log's fixed fields on the wire).
enum LogBatching {
    static let budgetBytes = 1 << 20
    static let overheadPerLog = 21

    /// The longest prefix of journal records (encoded ``LogRecord``s) that shares the first
    /// record's source and whose costs sum to at most `budget`, read in place (no `String`
    /// per line), with its cost; at least one record when the first is well-formed (a single
    /// line over the budget still goes, alone), none when `records` is empty or its first
    /// record is not a version-1 ``LogRecord``. A malformed record ends the prefix.
    static func sameSourcePrefix(_ records: some Collection<[UInt8]>, budget: Int = budgetBytes) -> (count: Int, cost: Int) {
        guard let first = records.first, let firstFields = LogRequestEncoding.fields(first) else { return (0, 0) }
        var count = 1
        var cost = firstFields.batchCost
        for record in records.dropFirst() {
            guard LogRequestEncoding.sameSource(first, record), let fields = LogRequestEncoding.fields(record),
                cost + fields.batchCost <= budget
            else { break }
            cost += fields.batchCost
            count += 1
        }
        return (count, cost)
    }
}
