import AgentTestSupport
import ChatContext
import Testing

struct InstructionTextTests {
    @Test func sanitising() {
        let text = "\r\n# Rules\r\nKeep\u{200B} it<!-- a\nmulti-line -->\rshort\u{FEFF}.<!-- open"
        #expect(InstructionText.sanitized(text) == "# Rules\nKeep it\nshort.<!-- open")
        #expect(InstructionText.sanitized("  <!--x--> \n") == "")
    }

    @Test func firstLine() {
        #expect(InstructionText.firstLine("\n\n  ## Project rules  \nmore") == "Project rules")
        #expect(InstructionText.firstLine("plain\n") == "plain")
        #expect(InstructionText.firstLine("  \n") == "")
        // A CRLF line ends at its CR (split by Character, "\r\n" was one and the whole file the line).
        #expect(InstructionText.firstLine("\r\n# Rules\r\nmore\r\n") == "Rules")
        #expect(InstructionText.firstLine("\u{A0}\n\u{3000}é\n") == "é")
        #expect(InstructionText.firstLine(utf8: [0xFF, 0x0A]) == "\u{FFFD}")
    }

    /// Unclosed `<!--`s cost one pass, not a search to the end from each of them (a 64 KiB
    /// SKILL.md of them cost hundreds of millions of byte comparisons on each resolve). 256 KiB
    /// here: over two minutes when each opening searched the rest.
    // Three minutes: on `.ownThreads` it may wait behind other long tests for one of the two threads.
    @Test(.timeLimit(.minutes(3)), .ownThreads) func unclosedCommentsCostOnePass() {
        let open = String(repeating: "<!--", count: 64 << 10)
        #expect(InstructionText.removingHTMLComments(open) == open)
        #expect(InstructionText.removingHTMLComments(open + "-->tail") == "tail")
        #expect(InstructionText.removingHTMLComments("a<!--b-->c" + open + "d") == "ac" + open + "d")
        #expect(InstructionText.sanitized(open + "\r\n") == open)
    }
}
