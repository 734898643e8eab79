import AgentCore

/// The environment blocks of recent starts without variables of their own, by provider
/// generation, session generation and chat; at most ``capacity`` (the most recently used first).
struct EnvironmentBlocks {
    static let capacity = 8
    private var entries: [(generation: UInt64, session: UInt64, chatID: String?, block: EnvironmentBlock)] = []

    mutating func block(generation: UInt64, session: UInt64 = 0, chatID: String?) -> EnvironmentBlock? {
        guard let index = entries.firstIndex(where: { $0.generation == generation && $0.session == session && $0.chatID == chatID }) else {
            return nil
        }
        let entry = entries.remove(at: index)
        entries.insert(entry, at: 0)
        return entry.block
    }

    mutating func store(_ block: EnvironmentBlock, generation: UInt64, session: UInt64 = 0, chatID: String?) {
        // Blocks of other generations are dropped: a start asks for the current ones.
        entries.removeAll { $0.generation != generation || $0.session != session || $0.chatID == chatID }
        entries.insert((generation, session, chatID, block), at: 0)
        if entries.count > Self.capacity { entries.removeLast(entries.count - Self.capacity) }
    }
}
