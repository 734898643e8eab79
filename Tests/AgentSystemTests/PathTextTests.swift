import AgentSystem
import Foundation
import Synchronization
import Testing

/// The FoundationEssentials stand-ins give what Foundation's `NSString`,
/// `removingPercentEncoding` and `trimmingCharacters` give.
struct PathTextTests {
    /// (Expected values are NSString's; comparing live crashes Foundation on "//a//b".)
    @Test func pathComponents() {
        let cases: [(path: String, parent: String, last: String, ext: String)] = [
            ("/a/b/c", "/a/b", "c", ""), ("/a/b/c/", "/a/b", "c", ""), ("/a", "/", "a", ""), ("/", "/", "/", ""),
            ("a", ".", "a", ""), ("a/b", "a", "b", ""), ("/a/b.tar.gz", "/a", "b.tar.gz", "gz"), (".hidden", ".", ".hidden", ""),
            ("/x/.hidden", "/x", ".hidden", ""), ("dir/file.txt", "dir", "file.txt", "txt"),
        ]
        for c in cases {
            #expect(parentDirectory(of: c.path) == c.parent, "\(c.path)")
            #expect(lastPathComponent(of: c.path) == c.last, "\(c.path)")
            #expect(pathExtension(of: c.path) == c.ext, "\(c.path)")
        }
    }

    @Test func percentDecodingMatchesFoundation() {
        for text in ["plain", "a%20b", "%E2%9C%93", "%zz", "50%", "%4", "%ff", "a%2Fb%2f"] {
            #expect(text.percentDecoded() == text.removingPercentEncoding, "\(text)")
        }
    }

    @Test func trimming() {
        #expect("  a b \t".trimmingSpaces() == "a b")
        #expect("\n a \r\n".trimmingWhitespace() == "a")
        #expect("   ".trimmingSpaces() == "")
        #expect(" x\n".trimmingSpaces() == "x\n")
    }

    @Test func threadsRunAndAreNamed() async {
        let seen = Mutex<String?>(nil)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            AgentThread.start(name: "path-text-test-thread") {
                let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
                seen.withLock { $0 = name.trimmingWhitespace() }
                done.resume()
            }
        }
        #expect(seen.withLock { $0 } == "path-text-test-")
    }
}
