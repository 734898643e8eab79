import AgentCore
import Foundation
import Testing

struct LatestValueBroadcastTests {
    /// The latest first, then newer ones; a slow subscriber holds only the newest; beyond
    /// the cap and after finish, streams end at once.
    @Test func latestThenNewerBoundedAndFinished() async {
        let broadcast = LatestValueBroadcast<Int>(maxSubscribers: 2)
        broadcast.publish(1)
        let first = broadcast.subscribe()
        broadcast.publish(2)
        broadcast.publish(3)
        var iterator = first.makeAsyncIterator()
        #expect(await iterator.next() == 3, "only the newest unread is buffered")
        let second = broadcast.subscribe()
        var secondIterator = second.makeAsyncIterator()
        #expect(await secondIterator.next() == 3, "a new subscriber gets the latest")
        var over = broadcast.subscribe().makeAsyncIterator()
        #expect(await over.next() == nil, "beyond the cap: ended")
        broadcast.finish()
        #expect(await iterator.next() == nil)
        #expect(broadcast.subscriberCount == 0)
        var late = broadcast.subscribe().makeAsyncIterator()
        #expect(await late.next() == nil)
    }

    @Test func withoutReplayOnlyLaterValues() async {
        let broadcast = LatestValueBroadcast<Int>(maxSubscribers: 1, replaysLatest: false)
        broadcast.publish(1)
        var iterator = broadcast.subscribe().makeAsyncIterator()
        broadcast.publish(2)
        #expect(await iterator.next() == 2)
    }
}

struct ConfiguredPathsTests {
    @Test func listsResolveAsTheAgentDoes() {
        let paths = ConfiguredPaths.resolve(
            [" ~ ", "~/a/../b", "/x/./y/", "rel/.mcp.json", "  ", "\u{3000}q"], home: "/home/u", workingDirectory: "/wd")
        #expect(paths == ["/home/u", "/home/u/b", "/x/y", "/wd/rel/.mcp.json", "/wd/q"])
    }

    /// A `/` followed by a combining mark is one grapheme and still a separator.
    @Test func cleanSplitsOnSlashBytes() {
        #expect(cleanAbsolutePath("/d/\u{301}x/../y") == "/d/y")
        #expect(cleanAbsolutePath("/../a//b/.") == "/a/b")
    }

    @Test func readSymbolicLinkReadsTheLinkText() throws {
        let directory = NSTemporaryDirectory() + "links-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createSymbolicLink(atPath: directory + "/l", withDestinationPath: "../target")
        #expect(readSymbolicLink(directory + "/l") == "../target")
        #expect(readSymbolicLink(directory) == nil, "not a link")
    }
}
