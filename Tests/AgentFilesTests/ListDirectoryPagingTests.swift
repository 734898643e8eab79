import AgentCore
import AgentTestSupport
import Foundation
import Synchronization
import Testing

@testable import AgentFiles

#if canImport(Glibc)
import Glibc
#endif

/// list-directory's pages come from a listing kept after the first page: a later page
/// reads nothing from the directory, and the pages concatenate to exactly that listing.
@Suite(.timeLimit(.minutes(2)))
struct ListDirectoryPagingTests {
    /// A clock the test moves by hand.
    final class ManualClock: Sendable {
        private let offset = Mutex(Duration.zero)
        private let start = ContinuousClock.now
        func advance(_ by: Duration) { offset.withLock { $0 += by } }
        var now: ContinuousClock.Instant { start + offset.withLock { $0 } }
    }

    /// Makes `count` files in a new directory `name` and returns its path and the names.
    static func populate(_ h: FilesHarness, _ name: String, count: Int) async throws -> (String, [String]) {
        let directory = h.file(name)
        try FileManager.default.createDirectory(atPath: directory + "/sub", withIntermediateDirectories: true)
        let names = (0..<count).map { String(format: "file-%05d", $0) }
        await onThread { for name in names { close(open(directory + "/" + name, O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)) } }
        return (directory, ["sub"] + names)
    }

    /// Pages of `limit` until the last (at most 100), calling `between` after each.
    static func pages(
        _ h: FilesHarness, _ directory: String, limit: Int, between: (Int) async throws -> Void = { _ in }
    ) async throws -> [[String]] {
        var pages: [[String]] = []
        var cursor: String?
        repeat {
            let query = "list-directory?path=\(FilesHarness.q(directory))&limit=\(limit)" + (cursor.map { "&cursor=\(FilesHarness.q($0))" } ?? "")
            let response = try await h.post(query, json: "{}")
            try #require(response.status == 200, "\(response)")
            let page = try #require(jsonObject(response.body))
            let contents = try #require(page["contents"] as? [[String: Any]])
            pages.append(contents.compactMap { $0["name"] as? String })
            cursor = page["next_cursor"] as? String
            try await between(pages.count)
        } while cursor != nil && pages.count < 100
        return pages
    }

    /// Only the first page reads the directory; files added between pages are in neither
    /// page (the kept listing is the directory as the first page found it), nothing is
    /// repeated or skipped, and the last page drops the kept listing.
    @Test func laterPagesReadNothingAndConcatenateToTheListing() async throws {
        let listings = ListingCache()
        try await withFilesServer(listings: listings) { h in
            let (directory, names) = try await Self.populate(h, "many", count: 2_500)
            let pages = try await Self.pages(h, directory, limit: 1_000) { page in
                close(open(directory + "/aaa-\(page)", O_CREAT | O_WRONLY | O_CLOEXEC, 0o644))
                close(open(directory + "/zzz-\(page)", O_CREAT | O_WRONLY | O_CLOEXEC, 0o644))
            }
            #expect(pages.map(\.count) == [1_000, 1_000, 501])
            #expect(pages.flatMap { $0 } == names, "exactly the listing the first page read")
            #expect(listings.reads == 1, "one read of the directory for three pages")
            #expect(listings.keptCount == 0, "the last page dropped the kept listing")
        }
    }

    /// A cursor whose listing expired (or was dropped) continues after the entry it names:
    /// one more read of the directory, and every entry present throughout once.
    @Test func anExpiredCursorContinuesAfterItsEntry() async throws {
        let clock = ManualClock()
        let listings = ListingCache(now: { clock.now })
        try await withFilesServer(listings: listings) { h in
            let (directory, names) = try await Self.populate(h, "aging", count: 30)
            let pages = try await Self.pages(h, directory, limit: 10) { page in
                if page == 1 { clock.advance(ListingCache.idleLifetime + .seconds(1)) }
            }
            #expect(pages.flatMap { $0 } == names)
            #expect(listings.reads == 2, "the first page, then the page after the expiry; the last page came from the new kept listing")
            // A cursor of another directory's listing is no listing of this one.
            let first = try #require(jsonObject(try await h.post("list-directory?path=\(FilesHarness.q(directory))&limit=5", json: "{}").body))
            let cursor = try #require(first["next_cursor"] as? String)
            let other = try await h.post("list-directory?path=\(FilesHarness.q(h.directory))&limit=5&cursor=\(FilesHarness.q(cursor))", json: "{}")
            #expect(other.status == 200)
        }
    }

    /// The kept listings are bounded in count and entries; the least recently used goes first.
    @Test func keptListingsAreBounded() throws {
        let listings = ListingCache(maxListings: 2, maxEntries: 10)
        let items = { (n: Int) in (0..<n).map { ListingCache.Item(name: "f\($0)", isDir: false) } }
        let a = try #require(listings.keep(items(3), directory: "/a"))
        let b = try #require(listings.keep(items(3), directory: "/b"))
        #expect(listings.lookup(a, directory: "/a") != nil)
        let c = try #require(listings.keep(items(3), directory: "/c"))
        #expect(listings.lookup(b, directory: "/b") == nil, "the least recently used was dropped for the third")
        #expect(listings.lookup(a, directory: "/a") != nil)
        #expect(listings.lookup(c, directory: "/c") != nil)
        #expect(listings.lookup(a, directory: "/c") == nil, "a listing answers for its own directory only")
        _ = try #require(listings.keep(items(8), directory: "/d"))
        #expect(listings.keptCount == 1, "8 + 3 entries are over 10: both older listings dropped")
        #expect(listings.keep(items(11), directory: "/e") == nil, "a listing over the bound is not kept")
    }

    /// `limit` is 1...10000 as the OpenAPI document says: 0 and 10001 are 400s naming it;
    /// without `limit` and `cursor` the whole listing comes, without `next_cursor`.
    @Test func limitOutsideItsRangeIsRefused() async throws {
        try await withFilesServer { h in
            let path = FilesHarness.q(h.directory)
            for limit in ["0", "10001"] {
                let response = try await h.post("list-directory?path=\(path)&limit=\(limit)", json: "{}")
                #expect(response.status == 400, "limit=\(limit)")
                #expect(response.bodyText.contains(#""field":"limit""#), "\(response)")
            }
            #expect(try await h.post("list-directory?path=\(path)&limit=10000", json: "{}").status == 200)
            let bogus = try await h.post("list-directory?path=\(path)&limit=5&cursor=zz", json: "{}")
            #expect(bogus.status == 400)
            #expect(bogus.bodyText.contains(#""field":"cursor""#))
        }
    }
}
