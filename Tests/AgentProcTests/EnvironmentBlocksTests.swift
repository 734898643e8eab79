import AgentCore
@testable import AgentProc
import Testing

/// The bounded cache of child environments by provider generation and chat.
struct EnvironmentBlocksTests {
    @Test func keyedByGenerationAndChatIncludingNoChat() {
        var blocks = EnvironmentBlocks()
        let plain = EnvironmentBlock(["A": "1"])
        let chat = EnvironmentBlock(["A": "1", "CODER_CHAT_ID": "c"])
        blocks.store(plain, generation: 1, chatID: nil)
        blocks.store(chat, generation: 1, chatID: "c")
        #expect(blocks.block(generation: 1, chatID: nil) === plain)
        #expect(blocks.block(generation: 1, chatID: "c") === chat)
        #expect(blocks.block(generation: 1, chatID: "d") == nil)
        #expect(blocks.block(generation: 2, chatID: nil) == nil)
    }

    @Test func aNewGenerationDropsTheOthers() {
        var blocks = EnvironmentBlocks()
        blocks.store(EnvironmentBlock(["A": "1"]), generation: 1, chatID: "a")
        blocks.store(EnvironmentBlock(["A": "1"]), generation: 1, chatID: "b")
        blocks.store(EnvironmentBlock(["A": "2"]), generation: 2, chatID: "a")
        #expect(blocks.block(generation: 1, chatID: "b") == nil)
        #expect(blocks.block(generation: 2, chatID: "a")?.environment == ["A": "2"])
    }

    @Test func boundedKeepingTheMostRecentlyUsed() {
        var blocks = EnvironmentBlocks()
        for index in 0..<EnvironmentBlocks.capacity {
            blocks.store(EnvironmentBlock(["I": "\(index)"]), generation: 7, chatID: "chat-\(index)")
        }
        // The oldest is used again, so the next store drops the second oldest instead.
        #expect(blocks.block(generation: 7, chatID: "chat-0") != nil)
        blocks.store(EnvironmentBlock(["I": "new"]), generation: 7, chatID: "chat-new")
        #expect(blocks.block(generation: 7, chatID: "chat-0") != nil)
        #expect(blocks.block(generation: 7, chatID: "chat-1") == nil)
        #expect(blocks.block(generation: 7, chatID: "chat-new") != nil)
        var kept = 0
        for index in 0..<EnvironmentBlocks.capacity where blocks.block(generation: 7, chatID: "chat-\(index)") != nil { kept += 1 }
        #expect(kept == EnvironmentBlocks.capacity - 1)
    }

    /// A session generation (the desktop's DISPLAY changed) is part of the key: a block of
    /// another one is not reused, and storing drops it.
    @Test func sessionGenerationIsPartOfTheKey() {
        var blocks = EnvironmentBlocks()
        let before = EnvironmentBlock(["DISPLAY": ":10"])
        blocks.store(before, generation: 1, session: 1, chatID: nil)
        #expect(blocks.block(generation: 1, session: 1, chatID: nil) === before)
        #expect(blocks.block(generation: 1, session: 2, chatID: nil) == nil)
        blocks.store(EnvironmentBlock([:]), generation: 1, session: 2, chatID: "c")
        #expect(blocks.block(generation: 1, session: 1, chatID: nil) == nil)
    }
}
