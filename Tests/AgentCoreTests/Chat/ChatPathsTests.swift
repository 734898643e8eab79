import AgentCore
import Testing

/// The chat → paths store.
@Suite struct ChatPathsTests {
    @Test func pathsAreStandardisedAndDeduplicated() {
        let store = ChatPaths()
        store.record("/work/repo/./src/../", chat: "a")
        store.record("/work/other", chat: "a")
        store.record("/work/repo", chat: "a")
        store.record("relative/path", chat: "a")
        store.record("", chat: "a")
        #expect(store.paths(chat: "a") == ["/work/other", "/work/repo"])
        #expect(store.paths(chat: "b").isEmpty)
    }

    @Test func boundsForgetTheOldest() {
        let store = ChatPaths(maxChats: 3, maxPathsPerChat: 2)
        for path in ["/1", "/2", "/3"] { store.record(path, chat: "a") }
        #expect(store.paths(chat: "a") == ["/2", "/3"])
        store.record("/x", chat: "b")
        store.record("/y", chat: "c")
        store.record("/4", chat: "a")  // a is now the most recent
        store.record("/z", chat: "d")  // forgets b, the one touched longest ago
        #expect(store.chatCount == 3)
        #expect(store.paths(chat: "b").isEmpty)
        #expect(store.paths(chat: "a") == ["/3", "/4"])
    }

    @Test func subscribersSeeArrivalsAndEndWhenTheChatIsForgotten() async {
        let store = ChatPaths(maxChats: 1)
        store.record("/before", chat: "a")
        var arrivals = store.arrivals(chat: "a").makeAsyncIterator()
        store.record("/one", chat: "a")
        store.record("/two", chat: "a")
        #expect(await arrivals.next() == "/one")
        #expect(await arrivals.next() == "/two")
        store.record("/other", chat: "b")  // forgets a: its stream finishes
        #expect(await arrivals.next() == nil)
    }

    @Test func subscribersPerChatAreBounded() async {
        let store = ChatPaths()
        let streams = (0..<ChatPaths.maxSubscribersPerChat).map { _ in store.arrivals(chat: "a") }
        var extra = store.arrivals(chat: "a").makeAsyncIterator()
        #expect(await extra.next() == nil, "a subscription over the bound finishes at once")
        _ = streams.count
    }

    /// Watching a chat that has no paths leaves nothing behind once the watcher goes, so
    /// watchers of unknown chats cannot push chats with paths out of the bounded store.
    @Test func aWatchedChatWithoutPathsIsForgottenWithItsLastWatcher() {
        let store = ChatPaths()
        store.record("/kept", chat: "with-paths")
        do {
            let first = store.arrivals(chat: "watched-only")
            let second = store.arrivals(chat: "with-paths")
            #expect(store.chatCount == 2)
            _ = (first, second)
        }
        #expect(store.chatCount == 1, "the watched-only chat went with its watcher")
        #expect(store.paths(chat: "with-paths") == ["/kept"])
    }

    /// When a new chat needs room, a chat that is only watched goes before a chat with
    /// paths, even one touched longer ago.
    @Test func aWatchedOnlyChatIsEvictedBeforeAChatWithPaths() async {
        let store = ChatPaths(maxChats: 2, maxPathsPerChat: 10)
        store.record("/a", chat: "with-paths")
        var watched = store.arrivals(chat: "watched-only").makeAsyncIterator()
        store.record("/b", chat: "new")
        #expect(store.paths(chat: "with-paths") == ["/a"])
        #expect(store.paths(chat: "new") == ["/b"])
        #expect(store.chatCount == 2)
        #expect(await watched.next() == nil, "the watched-only chat was forgotten: its stream finished")
    }

    @Test func concurrentWritersLoseNothingWithinTheBounds() async {
        let store = ChatPaths(maxChats: 64, maxPathsPerChat: 1000)
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    for i in 0..<500 { store.record("/w\(writer)/\(i)", chat: "chat-\(writer % 4)") }
                }
            }
        }
        #expect(store.chatCount == 4)
        for chat in 0..<4 { #expect(store.paths(chat: "chat-\(chat)").count == 1000) }
    }
}
